"""What the Spark engine reports to the exporter (hydrator/metrics), all on the driver, from each
micro-batch's progress event:

* counters: the batch's observed metrics (query.OBSERVATION), summed over the run;
* parked keys and state bytes: what the checkpoint's state store held when the run started
  (read once, when metrics are served) plus each batch's changes, which the group function
  reports with its counts (stateful.py);
* state keys: the state operator's row count;
* consumer lag per input partition: the latest offsets the source saw when it planned the batch
  minus the offsets the batch read up to;
* commit latency: the micro-batch's duration; last commit age: time since the last batch ended,
  or since Spark reported the query idle (nothing waiting).

Alive: the driver's JVM answers (a call to the query manager). Ready: a query is running, it
finished a micro-batch since it started, and a batch ended or the query reported itself idle
within READY_S (Spark reports an idle query every 10 s).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from hydrator.engines.spark.kafka_offsets import offsets_from_json
from hydrator.engines.spark.query import COUNTERS, OBSERVATION
from hydrator.engines.spark.stateful import PARKED_KEYS_CHANGE, STATE_BYTES_CHANGE
from hydrator.metrics.run import OK, Gauges, RunMetrics, Verdict

log = logging.getLogger("hydrator.spark")

READY_S = 60.0


class SparkMetrics(StreamingQueryListener):
    def __init__(
        self,
        application_id: str,
        input_topics: Iterable[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run = RunMetrics(application_id, "spark", (), clock)
        # A Spark query always has its next batch to run: the age counts from the last one.
        self.run.waiting_since = self.run.started_at
        self._inputs = frozenset(input_topics)
        self._clock = clock
        self._lock = threading.Lock()  # Spark may call listeners from more than one thread
        self._totals: Counter[str] = Counter()
        self._parked = 0
        self._state_bytes = 0
        self._query_running = False
        self._batch_done = False
        self._heard_at: float | None = None  # a batch ended, or the query was idle
        self._spark: SparkSession | None = None

    def attach(self, spark: SparkSession, parked: int = 0, state_bytes: int = 0) -> None:
        """Listen to `spark`'s queries; `parked` and `state_bytes`: what the checkpoint holds."""
        self._spark = spark
        self._parked, self._state_bytes = parked, state_bytes
        self.run.publish_gauges(Gauges(parked_keys=parked, state_bytes=state_bytes))
        spark.streams.addListener(self)

    def detach(self) -> None:
        if self._spark is not None:
            self._spark.streams.removeListener(self)

    # -- the listener (Spark's listener thread) --------------------------------------------------

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._query_running = True
            self._batch_done = False

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        with self._lock:
            row = progress.observedMetrics.get(OBSERVATION)
            if row is not None:
                counts = {name: int(row[name] or 0) for name in COUNTERS}
                self._parked += counts.pop(PARKED_KEYS_CHANGE)
                self._state_bytes += counts.pop(STATE_BYTES_CHANGE)
                self._totals.update(counts)
            self.run.publish_counts(self._totals)
            self.run.publish_gauges(
                Gauges(
                    parked_keys=self._parked,
                    state_keys=_state_keys(progress.stateOperators),
                    state_bytes=self._state_bytes,
                    lag=_lag(progress.sources, self._inputs) or self.run.gauges.lag,
                )
            )
            self.run.committed(progress.batchDuration / 1000)
            self._batch_done = True
            self._heard_at = self._clock()

    def onQueryIdle(self, event: Any) -> None:
        with self._lock:
            self.run.committed(None)
            self._heard_at = self._clock()

    def onQueryTerminated(self, event: Any) -> None:
        with self._lock:
            self._query_running = False

    # -- health (the HTTP server's threads) ------------------------------------------------------

    def alive(self) -> Verdict:
        spark = self._spark
        if spark is None:
            return OK  # the session is starting
        spark.streams.active  # noqa: B018 - a call into the driver's JVM, which must answer
        return OK

    def ready(self) -> Verdict:
        with self._lock:
            running, done, heard = self._query_running, self._batch_done, self._heard_at
        if not running:
            return Verdict(False, "not ready: no query is running")
        if not done:
            return Verdict(False, "not ready: the query has not finished a micro-batch yet")
        silent = self._clock() - (heard if heard is not None else self.run.started_at)
        if silent > READY_S:
            return Verdict(
                False,
                f"not ready: no micro-batch has ended for {silent:.0f} s (at most {READY_S:g})",
            )
        return OK


def _state_keys(operators: Iterable[Any]) -> int | None:
    """Rows (keys) of the query's state store, as the batch's progress reports them."""
    rows = [int(operator.numRowsTotal) for operator in operators]
    return sum(rows) if rows else None


def _lag(sources: Iterable[Any], inputs: frozenset[str]) -> dict[tuple[str, int], int]:
    lag: dict[tuple[str, int], int] = {}
    for source in sources:
        if not source.latestOffset or not source.endOffset:
            continue
        try:
            latest = offsets_from_json(json.loads(source.latestOffset))
            end = offsets_from_json(json.loads(source.endOffset))
        except (ValueError, TypeError, AttributeError):
            continue  # not the hydrator's Kafka source
        for tp, offset in latest.items():
            if tp[0] in inputs and tp in end:
                lag[tp] = max(offset - end[tp], 0)
    return lag
