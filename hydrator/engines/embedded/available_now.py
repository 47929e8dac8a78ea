"""`--available-now`: process what the inputs hold at start-up, then stop.

The goal for inputs is their end offsets when the run started. Handoffs are different: processing
produces them, so they are drained to whatever exists once the inputs are done, and the run ends
only when no key is parked waiting for one.

The goal is the whole group's, not this instance's: partitions it does not own (another member's,
or a dead member's until its session expires and the group hands them over) count through the
group's committed offsets. So a run that got only some partitions keeps polling until the others
are processed, by their owners or by itself after a rebalance. Keys parked in a dead member's
partitions show in no committed offset, so a run that does not own every partition also waits
until the group has settled (`settle_s`, twice the session timeout, counted from when its own part
was first done): by then a member that stopped before that has expired and its partitions were
handed over. That wait is skipped when this instance and its sibling workers (--workers) hold
every partition between them: then no other member holds any. And the workers of a run end
together: one that is done keeps its partitions until all are, or the others would have to take
them over (a rebalance) just before they end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from confluent_kafka import Consumer, TopicPartition

from hydrator.kafka.offsets import OffsetProbe
from hydrator.topology.layout import Topology

if TYPE_CHECKING:
    from hydrator.engines.embedded.assignment import Assignment

log = logging.getLogger(__name__)

COMMITTED_TIMEOUT_S = 30.0
WAITING_LOG_S = 10.0
# How often the loop's turns ask whether the run is done.
CHECK_INTERVAL_S = 0.25


class Siblings(Protocol):
    """The other workers of this run (--workers; engines/embedded/workers.py)."""

    def holding(self) -> set[int]:
        """The partition numbers they hold now."""
        ...

    def finish_together(self, finished: bool) -> bool:
        """Note whether this worker has finished its part; whether the run is done."""
        ...

    def run_done(self) -> bool:
        """Every worker was seen finished at once: the run is done, whatever became of the
        others' parts since."""
        ...


class NoSiblings:
    """A run in one process."""

    def holding(self) -> set[int]:
        return set()

    def finish_together(self, finished: bool) -> bool:
        return finished

    def run_done(self) -> bool:
        return False


class AvailableNow:
    def __init__(
        self,
        consumer: Consumer,
        probe: OffsetProbe,
        topology: Topology,
        settle_s: float = 0.0,
        siblings: Siblings | None = None,
        input_ends: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        """`input_ends`: the goals of the topics read as input, when they are not their ends now
        (a replay's, kept from its start: dlq_replay.py)."""
        self._consumer = consumer
        self._settle_s = settle_s
        self.siblings = siblings or NoSiblings()
        self._settle_until: float | None = None  # set when this instance's part is first done
        self._probe = probe
        self._topology = topology
        if input_ends is None:
            input_ends = probe.ends(
                (topic, p) for topic in topology.read_inputs for p in range(topology.partitions)
            )
        self.input_ends = dict(input_ends)
        self._last_waiting_log = 0.0
        self._last_check = 0.0

    def finished(self, assignment: Assignment, commit: Callable[[], None]) -> bool:
        """Whether the run is done, asked after each turn of the loop (at most every
        CHECK_INTERVAL_S): every input read to its goal, the open batch committed (`commit`),
        no key parked, every handoff applied, the whole group's part done, and the sibling
        workers done too."""
        if not assignment.assigned_once:
            return False
        if time.monotonic() - self._last_check < CHECK_INTERVAL_S:
            return False
        self._last_check = time.monotonic()
        siblings = self.siblings
        if siblings.run_done():
            return True
        owned = list(assignment.partitions)
        reached, pending = self.inputs_pending(owned)
        if reached:
            # Records keep arriving after the snapshot: stop fetching them, or the run never
            # ends. (Records already fetched past the goal are processed; that is harmless.)
            self._consumer.pause(reached)
        if pending:
            siblings.finish_together(False)
            return False
        commit()
        finished = (
            assignment.parked == 0
            and self.handoffs_done(owned)
            # the partitions of other (or stopped) members count too
            and self.group_done(owned)
        )
        return siblings.finish_together(finished)

    def inputs_pending(
        self, owned: Iterable[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(reached, pending): owned input partitions at or past their goal, and the others."""
        reached: list[TopicPartition] = []
        pending: list[TopicPartition] = []
        for tp in owned:
            if self._topology.is_read_input(tp.topic):
                done = self.position(tp) >= self.input_ends[(tp.topic, tp.partition)]
                (reached if done else pending).append(tp)
        return reached, pending

    def handoffs_done(self, owned: Iterable[TopicPartition]) -> bool:
        """Call after committing: our own handoffs are visible only once committed."""
        handoff = self._topology.handoff_topic
        mine = [tp for tp in owned if tp.topic == handoff]
        ends = self._probe.ends((tp.topic, tp.partition) for tp in mine)
        return all(self.position(tp) >= ends[(tp.topic, tp.partition)] for tp in mine)

    def group_done(self, owned: Iterable[TopicPartition]) -> bool:
        """Call once the owned partitions are done: the group's committed offsets of every other
        input and handoff partition have reached their goals."""
        owned = list(owned)
        self._commit_skipped(owned)
        if not self._settled(owned):
            return False
        mine = {(tp.topic, tp.partition) for tp in owned}
        handoff = self._topology.handoff_topic
        others = [
            (topic, p)
            for topic in (*self._topology.read_inputs, handoff)
            for p in range(self._topology.partitions)
            if (topic, p) not in mine
        ]
        if not others:
            return True
        goals = dict(self.input_ends)
        goals.update(self._probe.ends(tp for tp in others if tp[0] == handoff))
        committed = self._committed(others)
        behind = sorted({p for (topic, p) in others if committed[topic, p] < goals[topic, p]})
        if behind:
            self._log_waiting(
                "available-now: this instance is done; waiting for partitions %s, which the "
                "group has not processed to their end yet (another member owns them, or a "
                "stopped one until its session expires)",
                behind,
            )
        return not behind

    def _settled(self, owned: list[TopicPartition]) -> bool:
        """This instance (with its sibling workers) owns every partition, or the group has had
        time to take a stopped member's partitions away from it."""
        if self.siblings.run_done():
            # A sibling saw every worker done while this one committed: its partitions were
            # let go as it ended, not taken by another member.
            return True
        held = {tp.partition for tp in owned} | self.siblings.holding()
        if held >= set(range(self._topology.partitions)):
            return True
        if self._settle_until is None:
            self._settle_until = time.monotonic() + self._settle_s
        if time.monotonic() >= self._settle_until:
            return True
        self._log_waiting(
            "available-now: this instance is done; waiting up to %.0f s for the group to hand "
            "over the partitions of a member that may have stopped",
            self._settle_until - time.monotonic(),
        )
        return False

    def _log_waiting(self, message: str, *args: object) -> None:
        if time.monotonic() - self._last_waiting_log >= WAITING_LOG_S:
            self._last_waiting_log = time.monotonic()
            log.info(message, *args)

    def _committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The group's committed offsets; the log start where nothing is committed."""
        tps = [TopicPartition(topic, p) for topic, p in partitions]
        offsets: dict[tuple[str, int], int] = {}
        for tp in self._consumer.committed(tps, COMMITTED_TIMEOUT_S):
            key = (tp.topic, tp.partition)
            offsets[key] = tp.offset if tp.offset >= 0 else self._probe.watermarks(*key)[0]
        return offsets

    def _commit_skipped(self, owned: list[TopicPartition]) -> None:
        """Commit positions that moved past transaction markers only, with nothing processed:
        other members judge this instance's partitions by the committed offsets, and two
        instances waiting for each other's markers would wait forever. A replay has no other
        members, and commits its own offsets (never past its goal, with the goal kept)."""
        if not owned or self._topology.replaying:
            return
        positions = {
            (tp.topic, tp.partition): tp.offset
            for tp in self._consumer.position([TopicPartition(t.topic, t.partition) for t in owned])
        }
        ahead = [
            TopicPartition(tp.topic, tp.partition, positions[(tp.topic, tp.partition)])
            for tp in self._consumer.committed(
                [TopicPartition(t.topic, t.partition) for t in owned], COMMITTED_TIMEOUT_S
            )
            if positions[(tp.topic, tp.partition)] > max(tp.offset, 0)
        ]
        if ahead:
            self._consumer.commit(offsets=ahead, asynchronous=False)

    def position(self, tp: TopicPartition) -> int:
        """Where consumption of `tp` stands, also before its first message arrived."""
        (current,) = self._consumer.position([TopicPartition(tp.topic, tp.partition)])
        if current.offset >= 0:
            return current.offset
        (committed,) = self._consumer.committed([TopicPartition(tp.topic, tp.partition)])
        if committed.offset >= 0:
            return committed.offset
        return self._probe.watermarks(tp.topic, tp.partition)[0]
