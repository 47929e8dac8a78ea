"""Processing-time timeouts without a micro-batch per trigger.

Spark fires a group's processing-time timeout only inside a micro-batch, and with
`GroupStateTimeout.ProcessingTimeTimeout` it would run an empty batch after every batch to look
for due ones: an idle query then runs a batch (a Python task per partition, a state store commit)
on every trigger, forever. The engine turns those no-data batches off; the driver makes Spark run
a batch only when a timeout can be due, by writing a tick record (routing.TICK: a keyless record
of the handoff topic) at that moment.

The moment is a lower bound of the timeouts armed in the state store, kept on the driver
(`TimeoutSchedule`):

* each micro-batch reports the earliest timeout its groups armed (stateful.NEXT_TIMEOUT, a
  wall-clock moment, in its observed metrics), which lowers the bound;
* a batch started after the bound fired what was due; the groups it did not touch keep timeouts
  no batch reported since, so the bound is then unknown until the driver reads the earliest one
  from the state store (`parked.earliest_timeout`, a small Spark job). It does so once no batch
  has ended for a moment: while batches follow each other, each of them fires what is due.

A tick's batch may fire a timeout before the query has caught up (clock.CatchUpGate): the group
then re-arms it as due, reports it, and the next tick, once the gate is open, fires it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from confluent_kafka import KafkaException, Producer
from pyspark.sql.streaming import StreamingQueryListener

from hydrator.engines.spark.clock import wall_ms
from hydrator.engines.spark.query import OBSERVATION
from hydrator.engines.spark.stateful import NEXT_TIMEOUT
from hydrator.kafka.client_config import ClientSettings

log = logging.getLogger("hydrator.spark")

# How long no batch must have ended before the driver reads the state store for the bound.
QUIET_S = 1.0
# A tick no batch has picked up after this long (a lost write, a query stuck) is written again.
TICK_RETRY_S = 30.0
# After a failed read of the state store or a failed tick, the next try.
RETRY_S = 10.0
_TICK_FLUSH_S = 30.0


def write_tick(clients: ClientSettings, handoff_topic: str) -> bool:
    """A tick record to partition 0 of the handoff topic; whether it was delivered."""
    producer = Producer(clients.producer())
    producer.produce(handoff_topic, value=None, key=None, partition=0)
    return producer.flush(_TICK_FLUSH_S) == 0


class TimeoutSchedule:
    """When the next armed timeout can be due, as far as the driver knows (times in wall ms).

    A batch's progress is reported after the batch committed, so a read of the state store that
    starts after a report includes what that batch armed; reports that come during a read are
    added to its result."""

    def __init__(self) -> None:
        self.known = False  # whether `due` bounds every armed timeout from below
        self.due: int | None = None  # None and known: nothing is armed
        self._tick_sent: int | None = None
        self._scanning = False
        self._reported: list[int] = []  # during a read: what batches armed
        self._last_start: int | None = None  # during a read: the latest batch start

    def batch_ended(self, started_ms: int, reported_ms: int | None) -> None:
        """A micro-batch that started at `started_ms` ended; its groups armed timeouts from
        `reported_ms` on (None: none). Spark fired in it every timeout before its start."""
        # The tick made this batch run, or the next will (it waits in the handoff topic); if
        # the batch did not fire the timeout, another tick is written.
        self._tick_sent = None
        if self.known and self.due is not None and self.due < started_ms:
            self.known, self.due = False, None
        if self._scanning:
            self._last_start = max(self._last_start or started_ms, started_ms)
            # one fired is re-armed and reported by this batch if it is still to come
            self._reported = [r for r in self._reported if r >= started_ms]
            if reported_ms is not None:
                self._reported.append(reported_ms)
        elif self.known and reported_ms is not None:
            self.due = reported_ms if self.due is None else min(self.due, reported_ms)

    def needs_scan(self) -> bool:
        return not self.known

    def scan_started(self) -> None:
        self._scanning, self._reported, self._last_start = True, [], None

    def scanned(self, earliest_ms: int | None) -> None:
        """The state store's earliest armed timeout (None: none), read since `scan_started`.
        A batch that started past it during the read may have fired it: then the bound stays
        unknown, to be read again."""
        last_start, reported = self._last_start, self._reported
        self.scan_failed()
        if earliest_ms is not None and last_start is not None and earliest_ms < last_start:
            return
        self.known = True
        self.due = min([*reported, *([] if earliest_ms is None else [earliest_ms])], default=None)

    def scan_failed(self) -> None:
        self._scanning, self._reported, self._last_start = False, [], None

    def tick_due(self, now_ms: int) -> bool:
        """Whether a tick should be written now: a timeout can be due and no batch has ended
        since the last tick was written (unless that was long ago)."""
        if not self.known or self.due is None or self.due > now_ms:
            return False
        return self._tick_sent is None or now_ms - self._tick_sent >= TICK_RETRY_S * 1000

    def tick_sent(self, now_ms: int) -> None:
        self._tick_sent = now_ms

    def wait_s(self, now_ms: int) -> float | None:
        """How long nothing can come due (None: until a batch reports a timeout)."""
        if not self.known or self.due is None:
            return None
        return max(0.0, (self.due - now_ms) / 1000)


class TimeoutTicker(StreamingQueryListener):
    """The driver's thread that reads the bound and writes the ticks, and the listener that
    feeds it each micro-batch's progress."""

    def __init__(
        self,
        earliest_timeout: Callable[[], int | None],
        tick: Callable[[], bool],
        stopping: threading.Event,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        """`earliest_timeout` reads the state store, `tick` writes a tick record; nothing more
        starts once `stopping` is set (the engine is stopping the query)."""
        self._earliest_timeout = earliest_timeout
        self._tick = tick
        self._stopping = stopping
        self._clock = clock
        self.schedule = TimeoutSchedule()
        self._changed = threading.Condition()
        self._stopped = False
        self._last_batch_s = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="hydrator-timeouts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.batch_ended(event.progress)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def batch_ended(self, progress: Any) -> None:
        """A finished micro-batch's progress (StreamingQueryProgress)."""
        row = (progress.observedMetrics or {}).get(OBSERVATION)
        reported = row.asDict().get(NEXT_TIMEOUT) if row is not None else None
        started = _epoch_ms(progress.timestamp)
        with self._changed:
            self.schedule.batch_ended(started, None if reported is None else int(reported))
            self._last_batch_s = time.monotonic()
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                if self._halted:
                    return
                wait = self._next_step()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                scan = self.schedule.needs_scan()
                if scan:
                    self.schedule.scan_started()
            if scan:
                self._scan()
            else:
                self._write_tick()

    @property
    def _halted(self) -> bool:
        return self._stopped or self._stopping.is_set()

    def _next_step(self) -> float:
        """Seconds to wait before the next scan or tick (0: now)."""
        schedule, now = self.schedule, self._clock()
        if schedule.needs_scan():
            return max(0.0, QUIET_S - (time.monotonic() - self._last_batch_s))
        if schedule.tick_due(now):
            return 0.0
        wait = schedule.wait_s(now)
        return min(wait if wait is not None and wait > 0 else RETRY_S, RETRY_S)

    def _scan(self) -> None:
        try:
            earliest = self._earliest_timeout()
        except Exception as exc:
            with self._changed:
                self.schedule.scan_failed()
                if self._halted:
                    return
                reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                log.warning("could not read the next timeout from the state store: %s", reason)
                self._changed.wait(RETRY_S)
            return
        with self._changed:
            self.schedule.scanned(earliest)

    def _write_tick(self) -> None:
        try:
            delivered = self._tick()
            problem = f"not delivered within {_TICK_FLUSH_S:.0f} s"
        except KafkaException as exc:
            delivered, problem = False, str(exc)
        with self._changed:
            if delivered:
                self.schedule.tick_sent(self._clock())
            elif not self._halted:
                log.warning("a tick record for due timeouts: %s; trying again", problem)
                self._changed.wait(RETRY_S)


def _epoch_ms(timestamp: str) -> int:
    """A progress event's ISO-8601 timestamp (`2026-01-01T00:00:00.000Z`) in ms."""
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
