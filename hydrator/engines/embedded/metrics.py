"""What the embedded engine reports to the exporter (hydrator/metrics): its counts as they commit,
parked keys, state size and consumer lag once a second, each commit's latency, and the answers of
/healthz and /readyz.

Everything but `alive` and `ready` runs on the engine's thread; those two run on the HTTP
server's and read only plain values the engine's thread replaces.

Alive: the engine's thread turned within ALIVE_S. It turns in every loop it waits in (polling,
restoring, waiting for a broker, pausing before a restart: each asks whether to stop, and that
counts), or it is inside a Kafka call the watchdog still gives time (past that the watchdog ends
the process anyway).

Ready: running its poll loop (not starting, restoring, waiting for a broker or restarting), given
its partitions by the group, and no read record has waited for a commit longer than
READY_COMMIT_INTERVALS x --commit-interval (at least READY_MIN_S, and at least twice
--backlog-commit-interval, how long a batch may stay open while a backlog waits).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import replace

from confluent_kafka import Consumer, TopicPartition

from hydrator.engines.embedded.assignment import Assignment
from hydrator.engines.embedded.counts import RunCounts
from hydrator.metrics.run import OK, Gauges, RunMetrics, Verdict
from hydrator.topology.layout import Topology

ALIVE_S = 120.0
READY_COMMIT_INTERVALS = 100
READY_MIN_S = 10.0
GAUGES_EVERY_S = 1.0


class Phase(enum.Enum):
    STARTING = "starting"
    WAITING_FOR_BROKER = "waiting for a broker at --bootstrap-servers"
    RESTORING = "restoring state from the changelog"
    RUNNING = "running"
    RESTARTING = "restarting after a Kafka failure"
    STOPPING = "stopping"


class EmbeddedMetrics:
    def __init__(
        self,
        application_id: str,
        input_topics: tuple[str, ...],
        commit_interval_ms: int,
        counts: RunCounts,
        in_kafka_call: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
        backlog_commit_interval_ms: int = 0,
    ) -> None:
        """`in_kafka_call`: whether the engine's thread is in a Kafka call that still has time."""
        self.run = RunMetrics(application_id, "embedded", input_topics, clock)
        self.ready_within_s = max(
            READY_COMMIT_INTERVALS * commit_interval_ms / 1000,
            2 * backlog_commit_interval_ms / 1000,
            READY_MIN_S,
        )
        self.phase = Phase.STARTING
        self._counts = counts
        self._in_kafka_call = in_kafka_call
        self._clock = clock
        self._last_turn = clock()
        self._gauges_due = 0.0
        self._assignment: Assignment | None = None

    # -- the engine's thread ---------------------------------------------------------------------

    def turned(self) -> None:
        self._last_turn = self._clock()

    def enter(self, phase: Phase, assignment: Assignment | None = None) -> None:
        self.phase = phase
        if assignment is not None:
            self._assignment = assignment
        self.turned()

    def loop_turned(
        self,
        waiting_since: float | None,
        consumer: Consumer,
        assignment: Assignment,
        topology: Topology,
    ) -> None:
        """Once per turn of the poll loop: `waiting_since`, when the open batch's first record
        was read (monotonic; None: nothing waits)."""
        now = self._clock()
        self._last_turn = now
        self.run.waiting_since = waiting_since
        if now >= self._gauges_due:
            self._gauges_due = now + GAUGES_EVERY_S
            self.run.publish_gauges(
                Gauges(
                    parked_keys=assignment.parked,
                    state_keys=assignment.state_keys,
                    state_bytes=assignment.state_bytes,
                    lag=partition_lag(consumer, assignment, topology),
                )
            )

    def committed(self, latency_s: float | None) -> None:
        """A transaction committed (None: nothing needed committing); its counts are in the
        run's totals now. The state gauges move with them: they count what is committed, and a
        scrape between this commit and the next gauge refresh must not show its counts beside
        the state of before it (the lag, read from the consumer, stays as last refreshed)."""
        self.run.committed(latency_s)
        assignment = self._assignment
        if assignment is not None:
            self.run.publish_gauges(
                replace(
                    self.run.gauges,
                    parked_keys=assignment.parked,
                    state_keys=assignment.state_keys,
                    state_bytes=assignment.state_bytes,
                )
            )
        self.run.publish_counts(self._counts.totals, self._counts.by_topic)

    # -- the HTTP server's threads ---------------------------------------------------------------

    def alive(self) -> Verdict:
        silent = self._clock() - self._last_turn
        if silent <= ALIVE_S or self._in_kafka_call():
            return OK
        phase = self.phase.value
        return Verdict(False, f"the engine's thread has not turned for {silent:.0f} s ({phase})")

    def ready(self) -> Verdict:
        if self.phase is not Phase.RUNNING:
            return Verdict(False, f"not ready: {self.phase.value}")
        assignment = self._assignment
        if assignment is None or not assignment.assigned_once:
            return Verdict(False, "not ready: waiting for the consumer group to assign partitions")
        age = self.run.last_commit_age_s()
        if age > self.ready_within_s:
            return Verdict(
                False,
                f"not ready: records have waited {age:.1f} s for a commit "
                f"(at most {self.ready_within_s:g} s)",
            )
        return OK


def partition_lag(
    consumer: Consumer, assignment: Assignment, topology: Topology
) -> dict[tuple[str, int], int]:
    """Per owned input partition (replaying: dead-letter partition): its high watermark (as last
    fetched) minus the position. A partition nothing was read from since it was assigned has no
    position yet (librdkafka gives one once it hands a record over): it stands at its committed
    offset, else its lag is unknown."""
    lag = {}
    owned = [tp for tp in assignment.partitions if topology.is_read_input(tp.topic)]
    for tp in consumer.position(owned) if owned else []:
        _, high = consumer.get_watermark_offsets(
            TopicPartition(tp.topic, tp.partition), cached=True
        )
        position = tp.offset if tp.offset >= 0 else assignment.committed.of(tp.topic, tp.partition)
        if position >= 0 and high >= 0:
            lag[(tp.topic, tp.partition)] = max(high - position, 0)
    return lag
