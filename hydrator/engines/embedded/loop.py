"""The poll loop: consume a batch, hand each record to its task, fire timers, commit when due.

The loop coordinates; each of its other jobs has its own object, sharing the run's parts
(run_parts.py): when the open batch is due (batch.py), committing it in one transaction
(commit.py), what a rebalance or a failed local store does (rebalances.py), the re-select step
(reselect_step.py) and whether an --available-now run is done (available_now.py).
A local store that fails under a read or a write (StorageError: a damaged block, a missing file,
a row without its large value, also read inside the hydration rules) costs no record: the open
batch is aborted and redone (rebalances.py).
Each task is given its own processing-clock time, and fires timers only once it has caught up
with what was waiting in its partitions when it was assigned (clock.py).
A replay (`hydrator dlq replay`) runs this loop with the dead-letter topic as its input: each of its
records is unwrapped to the record it holds, or not processed (dlq_replay.py).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from confluent_kafka import KafkaException, Message

from hydrator.core.hydrator import read_handoff
from hydrator.core.records import DeadLetter
from hydrator.core.reselected import Reselected
from hydrator.engines.embedded.available_now import AvailableNow
from hydrator.engines.embedded.batch import OpenBatch
from hydrator.engines.embedded.commit import BatchCommit
from hydrator.engines.embedded.dlq_replay import DlqInput
from hydrator.engines.embedded.progress import ProgressSink
from hydrator.engines.embedded.rebalances import InputEnds, Rebalances
from hydrator.engines.embedded.reselect_step import BatchReselect
from hydrator.engines.embedded.run_parts import RunParts
from hydrator.engines.embedded.topics import check_topic_error
from hydrator.kafka import consumed
from hydrator.kafka.consumed import raw_record
from hydrator.kafka.rebalance_callbacks import RebalanceCallbacks
from state.errors import StorageError

log = logging.getLogger(__name__)

MAX_BATCH = 5000
# A consume batch is sized to about this many bytes of input plus outputs, at the open
# transaction's mean (what a batch holds until it commits: batch.py).
MAX_BATCH_BYTES = 8 * 1024 * 1024
# The hot path allocates many short-lived, acyclic objects (decoded events, rows, outputs); at
# Python's default gen-0 threshold (700) the cyclic collector ran thousands of times a second and
# took 7% of the loop. Cycles are rare here, so collect an order of magnitude less often.
GC_GEN0_THRESHOLD = 20_000
# Until the first records tell their size.
FIRST_BATCH = 256


@dataclass(frozen=True)
class LoopSettings:
    """`commit_interval_ms`, `backlog_commit_interval_ms`: when a batch is due (batch.py);
    `new_partitions_from_first_record`, `new_inputs_at_end`: where partitions the group has no
    offset for start (rebalances.py)."""

    commit_interval_ms: int
    backlog_commit_interval_ms: int | None = None
    new_partitions_from_first_record: bool = False
    new_inputs_at_end: InputEnds | None = None


class StreamLoop:
    def __init__(
        self,
        parts: RunParts,
        settings: LoopSettings,
        progress: ProgressSink,
        available_now: AvailableNow | None = None,
        reselect: BatchReselect | None = None,
        replay: DlqInput | None = None,
    ) -> None:
        """`available_now`: stop once everything available at start is processed;
        `reselect`: --reselect (reselect_step.py); `replay`: the dead-letter topic is the input
        (`hydrator dlq replay`, dlq_replay.py)."""
        self._parts = parts
        self._progress = progress
        self._available_now = available_now
        self._reselect = reselect
        self._replay = replay
        self._batch = OpenBatch(
            parts, settings.commit_interval_ms, settings.backlog_commit_interval_ms
        )
        self._commit = BatchCommit(parts, self._batch, replay)
        self._rebalances = Rebalances(
            parts,
            self._commit,
            settings.new_partitions_from_first_record,
            settings.new_inputs_at_end,
        )
        self._callbacks = RebalanceCallbacks()
        self._batch_limit = FIRST_BATCH

    def run(self, should_stop: Callable[[], bool]) -> None:
        with _rare_collections():
            self._run(should_stop)

    def _run(self, should_stop: Callable[[], bool]) -> None:
        parts, rebalances = self._parts, self._rebalances
        parts.consumer.subscribe(
            parts.topology.subscription,
            on_assign=self._callbacks.guard(rebalances.on_assign),
            on_revoke=self._callbacks.guard(rebalances.on_revoke),
            on_lost=self._callbacks.guard(rebalances.on_lost),
        )
        try:
            finished = False
            while not should_stop():
                try:
                    self._turn()
                except StorageError as exc:
                    rebalances.recover(exc)
                parts.metrics.loop_turned(
                    self._batch.started, parts.consumer, parts.assignment, parts.topology
                )
                self._progress.maybe_log()
                if self._finished():
                    log.info("available-now: everything available is processed")
                    finished = True
                    break
            self._commit.commit(checkpoint_clocks=True)
            if finished and self._replay is not None:
                self._replay.finish()
        except BaseException:
            # Nothing of the failed batch may become visible, and nothing may be committed on
            # the way out (closing the consumer revokes, and a revoke normally commits).
            rebalances.failed = True
            parts.writer.abort()
            parts.counts.discarded()
            raise
        finally:
            self._progress.log()

    def _turn(self) -> None:
        """Consume a batch, process it, fire timers, commit when due."""
        messages = self._next_batch()
        reselected = self._reselect_for(messages)
        local = self._parts.assignment.local_handoffs
        local.reselected = reselected  # for the records a handoff releases
        try:
            for msg in messages:
                self._dispatch(msg, reselected)
        finally:
            local.reselected = {}
        if messages:
            self._fit_batch(messages)
            self._parts.writer.serve_deliveries()
        self._fire_timers()
        if self._batch.due():
            self._commit.commit()

    def _finished(self) -> bool:
        if self._available_now is None:
            return False
        return self._available_now.finished(self._parts.assignment, self._commit.commit)

    # -- consuming ---------------------------------------------------------------------------

    def _next_batch(self) -> list[Message]:
        with self._callbacks.polling():
            return self._received()

    def _received(self) -> list[Message]:
        """The records that have arrived, up to the batch limit; when none has, waits for the
        first (at most until the open batch is due) and takes what came with it. A consume of
        N records waits for all N or its whole timeout, which held records that had arrived."""
        consumer, batch = self._parts.consumer, self._batch
        messages = consumer.consume(self._batch_limit, 0)
        began = batch.last_commit_began
        batch.last_commit_began = None
        if messages:
            if began is not None and batch.started is None and len(messages) < self._batch_limit:
                # They arrived while the last batch committed: their interval began with that
                # commit, not after it (with a backlog, whole batches, the interval counts as
                # usual, so that commits do not follow each other back to back).
                batch.started = began
            return messages
        first = consumer.poll(batch.poll_timeout_s())
        if first is None:
            return []
        if self._batch_limit == 1:
            return [first]
        return [first, *consumer.consume(self._batch_limit - 1, 0)]

    def _fit_batch(self, messages: list[Message]) -> None:
        """Count the batch's input bytes; size the next batch to about MAX_BATCH_BYTES."""
        batch = self._batch
        batch.input_bytes += sum(len(msg.value() or b"") for msg in messages)
        mean = max(batch.footprint() // max(batch.records, 1), 1)
        self._batch_limit = max(1, min(MAX_BATCH, MAX_BATCH_BYTES // mean))

    # -- records -----------------------------------------------------------------------------

    def _reselect_for(self, messages: list[Message]) -> Mapping[str, Reselected]:
        """With `--reselect`: what the source gives for the batch's unfillable placeholders."""
        if self._reselect is None:
            return {}
        parts = self._parts
        return self._reselect.for_consumed(
            messages, parts.assignment.tasks, parts.topology, parts.counts, self._replay
        )

    def _dispatch(self, msg: Message, reselected: Mapping[str, Reselected] | None = None) -> None:
        topology = self._parts.topology
        error = msg.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            check_topic_error(topology, msg.topic(), error)
            log.warning("consumer error: %s", error)
            return
        tasks = self._parts.assignment.tasks
        task = tasks.get(consumed.partition(msg))
        if task is None:
            log.warning("record of unowned partition %s-%d", msg.topic(), msg.partition())
            return
        self._batch.took()
        record = raw_record(msg)
        if self._replay is not None and record.topic != topology.handoff_topic:
            # a dead letter: the record it holds, for the task of that record's partition
            unwrapped = self._replay.take(record)
            if unwrapped is None:
                return
            record = unwrapped
            owner = tasks.get(record.partition)
            if owner is None:
                log.warning("dead letter of unowned partition %s", record.source)
                return
            task = owner
        counts = self._parts.counts
        if record.topic != topology.handoff_topic:
            counts.batch(record.topic)["records"] += 1
            supplement = reselected.get(record.source) if reselected else None
            task.process(record, task.now_ms(), supplement)
            return
        handoff = read_handoff(record)
        if isinstance(handoff, DeadLetter):
            task.dead_letter(handoff)
            return
        counts.batch()["handoffs_received"] += 1
        task.receive_handoff(handoff, task.now_ms(), reselected)

    # -- timers ------------------------------------------------------------------------------

    def _fire_timers(self) -> None:
        tasks = self._parts.assignment.tasks.values()
        waiting = [task for task in tasks if not task.catch_up.done]
        if waiting:
            pending = [tp for task in waiting for tp in task.catch_up.pending()]
            positions = self._parts.consumer.position(pending)
            for task in waiting:
                task.catch_up.advance(positions)
        for task in tasks:
            if task.catch_up.done:
                task.fire_timers(task.now_ms())


@contextmanager
def _rare_collections() -> Iterator[None]:
    """Collect cycles less often while the loop runs (GC_GEN0_THRESHOLD); what start-up made is
    frozen, so the collections that do run skip it."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
