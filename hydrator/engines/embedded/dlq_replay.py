"""`hydrator dlq replay`: the embedded engine reading the application's dead-letter topic in place
of its inputs (docs/operations.md, "Replaying dead letters").

A replay is a run of the same application: the same consumer group, state directory, state
changelog and transactional id, with the dead-letter and handoff topics as its subscription
(`Topology.replaying`). Each dead-letter record is judged (hydrator/dlq/selection.py): one the
replay takes is unwrapped to the record it holds (its own topic, partition, offset, key, value
and headers) and handed to the task of that partition, which hydrates it as any input record:
its output, its dead letter if it fails again, its handoffs and its state change all name the
original as `hydrator.source`. One the filters leave out is copied to the end of the
dead-letter topic; one that holds no input record is counted and passed over. What a batch
writes, its state changes and its progress through the dead-letter topic commit in one
transaction, as a run's batch does, so a replay killed at any point and started again repeats
and loses nothing.

The replay reads up to the dead-letter topic's end as it stood at its start (kept with its
committed offsets until it is done, hydrator/dlq/topic.py), never what it wrote itself: a record
at or past that goal is not processed, its partition is paused, and the offset committed for it
is the goal. The replay ends, as `--available-now` does, once every partition has reached its
goal, the handoff topic is drained and no key waits for a handoff; its last commit then drops
the goal, and the next replay starts where this one stopped.

Only one instance may work on an application's state: the replay waits for the application's
consumer group to have no members (a run that just ended leaves when its session times out),
and refuses when a run is still in it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from hydrator.dlq.selection import Leave, Replay, Selection, Verdict, judge
from hydrator.dlq.topic import goal_metadata, goal_of
from hydrator.engines.embedded.changelog import CommittedOffsets
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.transaction import TransactionalWriter
from hydrator.errors import ConfigurationError
from hydrator.events import RawRecord
from hydrator.kafka.admin import group_members
from hydrator.kafka.offsets import OffsetProbe
from hydrator.topology.layout import Topology

log = logging.getLogger(__name__)

COMMITTED_TIMEOUT_S = 60.0
# How many unreplayable dead letters are named in the log, one line each (then only counted).
NAMED_UNREPLAYABLE = 10


class ReplayRefused(ConfigurationError, RuntimeError):
    """The replay cannot go ahead as asked (exit 2): the application is running."""


def wait_for_members_to_leave(
    admin: AdminClient,
    application_id: str,
    wait_s: float,
    should_stop: Callable[[], bool],
) -> bool:
    """Wait until the application's consumer group has no members; ReplayRefused if it still
    has after `wait_s`. A run that ended (or was killed) a moment ago is still a member until
    its session times out; a run that is running stays one. False if a stop was requested.
    (Tansu lists no members: there only the state directory's lock keeps a replay from a run.)"""
    deadline = time.monotonic() + wait_s
    said = False
    while group_members(admin, application_id):
        if time.monotonic() >= deadline:
            raise ReplayRefused(
                f"--application-id {application_id}: the application is running (its consumer "
                f"group still has members after {wait_s:.0f} s); stop it, then replay: a replay "
                "works on the application's state, which one instance at a time may change"
            )
        if not said:
            log.info(
                "consumer group %s has members: waiting up to %.0f s for them to leave (a run "
                "that ended a moment ago leaves when its session times out)",
                application_id,
                wait_s,
            )
            said = True
        if should_stop():
            return False
        time.sleep(0.5)
    return True


class DlqInput:
    """The dead-letter topic as the input of a replay: what the loop asks of it."""

    def __init__(
        self,
        consumer: Consumer,
        writer: TransactionalWriter,
        topology: Topology,
        selection: Selection,
        counts: RunCounts,
    ) -> None:
        self._consumer = consumer
        self._writer = writer
        self._topology = topology
        self._topic = topology.dlq_topic
        self._selection = selection
        self._counts = counts
        # per partition: where this replay (or its unfinished predecessor) started, and its goal
        self.starts: dict[int, int] = {}
        self.goals: dict[int, int] = {}
        self._unreplayable_named = 0

    def start(self, probe: OffsetProbe) -> None:
        """Where the replay stands: the group's committed offsets, and the goal an unfinished
        replay kept with them, else the end of each partition now (call after the producer's
        transactions are initialised: a dead predecessor's open transaction is aborted then)."""
        partitions = range(self._topology.partitions)
        tps = [TopicPartition(self._topic, p) for p in partitions]
        committed = self._consumer.committed(tps, COMMITTED_TIMEOUT_S)
        bounds = probe.bounds((self._topic, p) for p in partitions)
        resumed = []
        for tp in committed:
            low, end = bounds[(self._topic, tp.partition)]
            start = tp.offset if tp.offset >= 0 else low
            goal = goal_of(tp.metadata)
            if goal is not None:
                resumed.append(tp.partition)
            self.starts[tp.partition] = start
            self.goals[tp.partition] = max(goal if goal is not None else end, start)
        total = sum(self.goals[p] - self.starts[p] for p in partitions)
        log.info(
            "replaying %s of %s: up to %d records, from offsets %s to %s%s",
            self._selection.describe(),
            self._topic,
            total,
            _per_partition(self.starts),
            _per_partition(self.goals),
            f" (the end an unfinished replay set, partitions {resumed})" if resumed else "",
        )

    @property
    def input_ends(self) -> dict[tuple[str, int], int]:
        """The goals, as `--available-now` takes its inputs' ends."""
        return {(self._topic, p): goal for p, goal in self.goals.items()}

    def take(self, record: RawRecord) -> RawRecord | None:
        """The record to hydrate for `record` of the dead-letter topic, or None: past the goal
        (its partition is paused), left for a later replay (copied in this transaction), or
        holding no input record (counted)."""
        if record.offset >= self.goals[record.partition]:
            self._consumer.pause([TopicPartition(self._topic, record.partition)])
            return None
        verdict = self._judge(record)
        if isinstance(verdict, Replay):
            return verdict.letter.original
        counts = self._counts.batch(verdict.topic)
        if isinstance(verdict, Leave):
            dead = (self._topic, record.partition, record.key, record.value, record.headers)
            self._writer.write_at(dead, record.timestamp_ms)
            counts["dlq_left"] += 1
            return None
        counts["dlq_unreplayable"] += 1
        if self._unreplayable_named < NAMED_UNREPLAYABLE:
            self._unreplayable_named += 1
            log.info(
                "%s:%d:%d is not replayable, left where it is: %s",
                self._topic,
                record.partition,
                record.offset,
                verdict.why,
            )
        return None

    def peek(self, record: RawRecord) -> RawRecord | None:
        """The record `take` would hydrate, without doing anything (for a look ahead)."""
        if record.offset >= self.goals[record.partition]:
            return None
        verdict = self._judge(record)
        return verdict.letter.original if isinstance(verdict, Replay) else None

    def _judge(self, record: RawRecord) -> Verdict:
        topology = self._topology
        return judge(
            record,
            self._selection,
            topology.inputs,
            topology.application_id,
            topology.partitions,
        )

    def committing(
        self, offsets: list[TopicPartition], committed: CommittedOffsets
    ) -> list[TopicPartition]:
        """The offsets a transaction commits: each dead-letter partition's, never past its goal
        (what lies there is the replay's own), with the goal kept in the metadata; a partition
        not read yet at where it stands (so the goal is kept from the first commit on)."""
        positions = {tp.partition: tp.offset for tp in offsets if tp.topic == self._topic}
        kept = [tp for tp in offsets if tp.topic != self._topic]
        for p, goal in self.goals.items():
            offset = positions.get(p, -1)
            if offset < 0:
                offset = max(committed.of(self._topic, p), self.starts[p])
            kept.append(
                TopicPartition(self._topic, p, min(offset, goal), metadata=goal_metadata(goal))
            )
        return kept

    def remaining(self) -> dict[str, int]:
        """Records of the dead-letter topic still to read before the goals (the progress line's
        lag)."""
        tps = [TopicPartition(self._topic, p) for p in self.goals]
        left = 0
        for tp in self._consumer.position(tps):
            at = tp.offset if tp.offset >= 0 else self.starts[tp.partition]
            left += max(self.goals[tp.partition] - at, 0)
        return {self._topic: left}

    def finish(self) -> None:
        """The replay is done (every goal reached, all committed): drop the goals, so that the
        next replay reads on from here to the end as it will be then."""
        done = [
            TopicPartition(self._topic, p, goal, metadata=goal_metadata(None))
            for p, goal in self.goals.items()
        ]
        self._consumer.commit(offsets=done, asynchronous=False)
        totals = self._counts.totals
        log.info(
            "dlq replay done: %d dead letters replayed (%d events hydrated, %d stale, %d "
            "dead-lettered again), %d left for a later replay, %d not replayable; %s read up to "
            "offsets %s",
            totals["records"],
            totals["events"],
            totals["stale_dropped"] + totals["stale_forwarded"],
            totals["dead_letters"],
            totals["dlq_left"],
            totals["dlq_unreplayable"],
            self._topic,
            _per_partition(self.goals),
        )


def _per_partition(offsets: dict[int, int]) -> str:
    return "[" + ", ".join(f"{p}: {offsets[p]}" for p in sorted(offsets)) + "]"
