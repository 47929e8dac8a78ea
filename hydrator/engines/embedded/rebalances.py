"""What the loop does when the consumer group moves partitions, and when a local store fails:
which tasks it opens and from where their partitions are read.

* Assigned: the group's committed offsets are read (every partition whose offsets judge a
  changelog record: a record's witness may name any, changelog.py), the tasks opened (restored
  from their changelog), and the partitions the group has no offset for started where the reset
  policy alone would not do.
* Revoked: the open batch commits with the tasks' clock readings, then the tasks are suspended
  (assignment.py); after a failure nothing commits and they are closed.
* Lost: someone else owns them now: the open batch is dropped, every task closed.
* A local store failed under a read or a write (StorageError): the open batch is dropped, the
  damaged store moved aside, every task reopened (the damaged one rebuilt from the changelog) and
  the inputs read again from the committed offsets, in the same process and without leaving the
  group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from hydrator.engines.embedded.commit import BatchCommit
from hydrator.engines.embedded.metrics import Phase
from hydrator.engines.embedded.run_parts import RunParts
from hydrator.engines.embedded.watchdog import blocking
from hydrator.kafka.broker_quirks import FIRST_OFFSET
from state.errors import StorageError

log = logging.getLogger(__name__)

COMMITTED_TIMEOUT_S = 60.0

# The ends of input partitions the group has no offset for (OffsetProbe.ends).
InputEnds = Callable[[list[tuple[str, int]]], dict[tuple[str, int], int]]


class Rebalances:
    def __init__(
        self,
        parts: RunParts,
        commit: BatchCommit,
        new_partitions_from_first_record: bool = False,
        new_inputs_at_end: InputEnds | None = None,
    ) -> None:
        """`new_partitions_from_first_record`: read a partition the group has no offset for from
        offset 0 rather than where ListOffsets(earliest) says it starts, which Tansu answers
        wrongly once producers wrote the partition at the same time
        (hydrator/kafka/broker_quirks.py). Below a real log start, offset 0 is out of range and
        the consumer's reset (earliest) applies; only for that reset policy.
        `new_inputs_at_end` (`auto.offset.reset=latest`): gives the ends of input partitions
        the group has no offset for; they start there, and the start is committed at once, so
        the application resumes from it and --available-now has reached it. Handoff partitions
        without an offset start at their beginning whatever the policy: a handoff another
        instance wrote before this one's first fetch must not be skipped."""
        self._parts = parts
        self._commit = commit
        self._from_first_record = new_partitions_from_first_record
        self._new_inputs_at_end = new_inputs_at_end
        # The loop failed: nothing may be committed on the way out.
        self.failed = False

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts, committed = self._parts, self._commit.committed
        parts.metrics.enter(Phase.RESTORING)
        if partitions:
            self._load_committed(consumer)
        parts.assignment.open(partitions, committed)
        new = {
            (tp.topic, tp.partition)
            for tp in partitions
            if committed.of(tp.topic, tp.partition) < 0
        }
        starts = self._starts(consumer, new)
        if starts:
            consumer.assign(
                [
                    TopicPartition(tp.topic, tp.partition, starts[(tp.topic, tp.partition)])
                    if (tp.topic, tp.partition) in starts
                    else tp
                    for tp in partitions
                ]
            )
        parts.metrics.enter(Phase.RUNNING)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assignment = self._parts.assignment
        if self.failed:
            assignment.close(partitions)
            return
        try:
            self._commit.commit(checkpoint_clocks=True)
        except StorageError as exc:
            # The next assignment reads on from the committed offsets and reopens the tasks.
            log.warning(
                "the local state store failed (%s): the open batch is aborted and redone from "
                "the committed offsets",
                exc,
            )
            self._parts.counts.totals["storage_failures"] += 1
            self._commit.abandon()
            assignment.close_all()
            assignment.set_aside(exc)
            return
        assignment.suspend(partitions)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else owns them now: our open batch must not commit, and every task's
        # uncommitted state went with it.
        log.warning("partitions lost: %s", sorted({tp.partition for tp in partitions}))
        self._commit.abandon()
        self._parts.assignment.close_all()

    def recover(self, failure: StorageError) -> None:
        """A local store failed: drop the open batch (nothing of it is committed), move the
        damaged store aside, reopen every task (restored from its changelog; the damaged one
        rebuilt) and read the inputs again from the committed offsets."""
        parts = self._parts
        log.warning(
            "the local state store failed (%s): the open batch is aborted and redone from the "
            "committed offsets",
            failure,
        )
        parts.counts.totals["storage_failures"] += 1
        self._commit.abandon()
        assignment, consumer, committed = parts.assignment, parts.consumer, self._commit.committed
        partitions = list(assignment.partitions)
        assignment.close_all()
        assignment.set_aside(failure)
        parts.metrics.enter(Phase.RESTORING)
        self._load_committed(consumer)
        assignment.open(partitions, committed)
        for tp in partitions:
            offset = committed.of(tp.topic, tp.partition)
            if offset < 0:  # nothing committed yet: from where the partition was first read
                offset = 0 if self._from_first_record else OFFSET_BEGINNING
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        # --available-now pauses a partition it has read to its goal: it must be read again.
        consumer.resume(partitions)
        parts.metrics.enter(Phase.RUNNING)

    def _load_committed(self, consumer: Consumer) -> None:
        """The group's committed offsets of every partition of the topics whose offsets judge
        a changelog record, not only those assigned: a record's witness may name any
        (changelog.py), a run's or a replay's."""
        topology = self._parts.topology
        every = [
            TopicPartition(topic, p)
            for topic in topology.offset_topics
            for p in range(topology.partitions)
        ]
        with blocking("committed offsets", COMMITTED_TIMEOUT_S):
            self._commit.committed.load(consumer.committed(every, COMMITTED_TIMEOUT_S))

    def _starts(self, consumer: Consumer, new: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Where the assigned partitions the group has no offset for start, where the reset
        policy alone would not do (see __init__)."""
        topology = self._parts.topology
        if self._new_inputs_at_end is None:
            return {tp: FIRST_OFFSET for tp in new} if self._from_first_record else {}
        starts = {tp: OFFSET_BEGINNING for tp in new if not topology.is_read_input(tp[0])}
        inputs = sorted(tp for tp in new if topology.is_read_input(tp[0]))
        if inputs:
            ends = self._new_inputs_at_end(inputs)
            at_end = [TopicPartition(topic, p, ends[(topic, p)]) for topic, p in inputs]
            with blocking("committing the start offsets", COMMITTED_TIMEOUT_S):
                consumer.commit(offsets=at_end, asynchronous=False)
            self._commit.committed.load(at_end)
            starts.update({(tp.topic, tp.partition): tp.offset for tp in at_end})
            log.info(
                "auto.offset.reset=latest: %s start at their end (offsets %s), committed",
                ", ".join(f"{topic}-{p}" for topic, p in inputs),
                ", ".join(str(tp.offset) for tp in at_end),
            )
        return starts
