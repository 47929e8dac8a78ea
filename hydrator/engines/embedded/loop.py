"""The poll loop: consume a batch, hand each record to its task, fire timers, commit.

Commits happen every `commit_interval_ms` (and before a rebalance takes partitions away); each
commit is one Kafka transaction carrying the batch's outputs, state changes and input offsets.
While a backlog waits (BACKLOG_RECORDS or more input records behind: after downtime, or input
faster than the engine), a batch stays open up to `backlog_commit_interval_ms` instead: a
transaction costs the same whatever it holds, and a key that changes again within one is written
to state and changelog once, so the backlog drains sooner. Its records have waited anyway; once
the engine has caught up, batches commit at `commit_interval_ms` again.
A local store that fails under a read or a write (StorageError: a damaged block, a missing file,
a row without its large value, also read inside the hydration rules) costs no record: the open
batch is aborted, the damaged store moved aside, every task reopened (the damaged one rebuilt
from the changelog) and the inputs read again from the committed offsets, in the same process
and without leaving the consumer group.
Each task is given its own processing-clock time, and fires timers only once it has caught up
with what was waiting in its partitions when it was assigned (clock.py).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from hydrator.core.hydrator import read_handoff
from hydrator.core.records import DeadLetter
from hydrator.core.reselect import Reselected
from hydrator.engines.embedded.assignment import Assignment
from hydrator.engines.embedded.available_now import AvailableNow
from hydrator.engines.embedded.changelog import CommittedOffsets
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.metrics import EmbeddedMetrics, Phase, partition_lag
from hydrator.engines.embedded.progress import ProgressSink
from hydrator.engines.embedded.reselect import BatchReselect
from hydrator.engines.embedded.topics import check_topic_error
from hydrator.engines.embedded.transaction import TransactionalWriter
from hydrator.engines.embedded.watchdog import blocking
from hydrator.kafka import consumed
from hydrator.kafka.broker_quirks import FIRST_OFFSET
from hydrator.kafka.consumed import raw_record
from hydrator.topology.layout import Topology
from state.errors import StorageError

log = logging.getLogger(__name__)

MAX_BATCH = 5000
POLL_TIMEOUT_S = 0.05
# Past this many records a commit is due whatever the interval: bounds the work redone after a
# crash (at a few thousand records a second, some seconds of it).
MAX_UNCOMMITTED = 50_000
# Wide rows (whole TOASTed values) must not make memory follow row size. What an open
# transaction holds until it commits is its changed states, one per key however often the key
# changed, each counted by the values its image holds beyond the key's committed image (which the
# state cache holds already; Task.held_bytes). As in Kafka Streams, where dirty entries live in
# the record cache, that memory is the state budget's: a commit is due once they reach half the
# process's share of --state-cache-bytes (held_bytes_cap), and not before MIN_HELD_BYTES. A cap
# below a hot key set's changed rows made every commit re-encode and recompress each of them (a
# single worker on 10,000 hot keys of 9 KB rows committed once a second instead of every 5 s,
# and spent a quarter more CPU per event). Outputs leave for the broker as they are produced and
# are freed once acknowledged (the loop serves delivery reports every turn; librdkafka's queue
# bounds the rest), and consumed records are dropped once processed, so neither counts; a key
# that changes again within the interval is written to the changelog and the store once. A
# consume batch is sized to about MAX_BATCH_BYTES of input plus outputs, at the open
# transaction's mean.
MIN_HELD_BYTES = 64 * 1024 * 1024
MAX_BATCH_BYTES = 8 * 1024 * 1024
# The hot path allocates many short-lived, acyclic objects (decoded events, rows, outputs); at
# Python's default gen-0 threshold (700) the cyclic collector ran thousands of times a second and
# took 7% of the loop. Cycles are rare here, so collect an order of magnitude less often.
GC_GEN0_THRESHOLD = 20_000
# Until the first records tell their size.
FIRST_BATCH = 256
AVAILABLE_NOW_CHECK_S = 0.25
# Input records waiting in the owned partitions from which the engine counts as behind. A few
# batches' worth: a steady stream the engine keeps up with never lags this much between commits.
BACKLOG_RECORDS = 5_000
COMMITTED_TIMEOUT_S = 60.0


def held_bytes_cap(cache_bytes: int) -> int:
    """The changed-state bytes past which an open transaction commits, for a process whose share
    of --state-cache-bytes is `cache_bytes`: half of it, and at least MIN_HELD_BYTES."""
    return max(MIN_HELD_BYTES, cache_bytes // 2)


class StreamLoop:
    def __init__(
        self,
        consumer: Consumer,
        writer: TransactionalWriter,
        assignment: Assignment,
        topology: Topology,
        counts: RunCounts,
        commit_interval_ms: int,
        available_now: AvailableNow | None,
        progress: ProgressSink,
        metrics: EmbeddedMetrics,
        backlog_commit_interval_ms: int | None = None,
        new_partitions_from_first_record: bool = False,
        reselect: BatchReselect | None = None,
    ) -> None:
        """`backlog_commit_interval_ms`: how long a batch may stay open while a backlog waits
        (None, or no longer than `commit_interval_ms`: batches never stretch).
        `new_partitions_from_first_record`: read a partition the group has no offset for from
        offset 0 rather than where ListOffsets(earliest) says it starts, which Tansu answers
        wrongly once producers wrote the partition at the same time
        (hydrator/kafka/broker_quirks.py). Below a real log start, offset 0 is out of range and
        the consumer's reset (earliest) applies; only for that reset policy."""
        self._consumer = consumer
        self._writer = writer
        self._assignment = assignment
        self._topology = topology
        self._counts = counts
        self._commit_interval_s = commit_interval_ms / 1000
        self._backlog_interval_s = max(backlog_commit_interval_ms or 0, commit_interval_ms) / 1000
        self._available_now = available_now
        self._progress = progress
        self._metrics = metrics
        self._uncommitted = 0
        self._uncommitted_bytes = 0  # of input records
        self._batch_limit = FIRST_BATCH
        self._batch_started: float | None = None
        # When the last commit began: records found waiting right after it arrived during it.
        self._last_commit_began: float | None = None
        self._failed = False
        self._last_finish_check = 0.0
        # What the group has committed: each transaction's witness is a position past it.
        self._committed = CommittedOffsets()
        self._from_first_record = new_partitions_from_first_record
        self._reselect = reselect  # --reselect (reselect.py)
        self._held_cap = held_bytes_cap(assignment.cache_bytes)

    def run(self, should_stop: Callable[[], bool]) -> None:
        with _rare_collections():
            self._run(should_stop)

    def _run(self, should_stop: Callable[[], bool]) -> None:
        self._consumer.subscribe(
            self._topology.subscription,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        try:
            while not should_stop():
                try:
                    self._turn()
                except StorageError as exc:
                    self._recover(exc)
                self._metrics.loop_turned(
                    self._batch_started, self._consumer, self._assignment, self._topology
                )
                self._progress.maybe_log()
                if self._finished():
                    log.info("available-now: everything available is processed")
                    break
            self.commit(checkpoint_clocks=True)
        except BaseException:
            # Nothing of the failed batch may become visible, and nothing may be committed on
            # the way out (closing the consumer revokes, and a revoke normally commits).
            self._failed = True
            self._writer.abort()
            self._counts.discarded()
            raise
        finally:
            self._progress.log()

    def _turn(self) -> None:
        """Consume a batch, process it, fire timers, commit when due."""
        messages = self._next_batch()
        reselected = self._reselect_for(messages)
        for msg in messages:
            self._dispatch(msg, reselected)
        if messages:
            self._fit_batch(messages)
            self._writer.serve_deliveries()
        self._fire_timers()
        if self._commit_due():
            self.commit()

    def _recover(self, failure: StorageError) -> None:
        """A local store failed: drop the open batch (nothing of it is committed), move the
        damaged store aside, reopen every task (restored from its changelog; the damaged one
        rebuilt) and read the inputs again from the committed offsets."""
        log.warning(
            "the local state store failed (%s): the open batch is aborted and redone from the "
            "committed offsets",
            failure,
        )
        self._counts.totals["storage_failures"] += 1
        self._abandon_batch()
        partitions = list(self._assignment.partitions)
        self._assignment.close_all()
        self._assignment.set_aside(failure)
        self._metrics.enter(Phase.RESTORING)
        every = [
            TopicPartition(topic, p)
            for topic in self._topology.subscription
            for p in range(self._topology.partitions)
        ]
        with blocking("committed offsets", COMMITTED_TIMEOUT_S):
            self._committed.load(self._consumer.committed(every, COMMITTED_TIMEOUT_S))
        self._assignment.open(partitions, self._committed)
        for tp in partitions:
            offset = self._committed.of(tp.topic, tp.partition)
            if offset < 0:  # nothing committed yet: from where the partition was first read
                offset = 0 if self._from_first_record else OFFSET_BEGINNING
            self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        # --available-now pauses a partition it has read to its goal: it must be read again.
        self._consumer.resume(partitions)
        self._metrics.enter(Phase.RUNNING)

    def _abandon_batch(self) -> None:
        """Abort the open transaction; the batch's counts and sizes go with it."""
        self._writer.abort()
        self._counts.discarded()
        self._uncommitted = 0
        self._uncommitted_bytes = 0
        for task in self._assignment.tasks.values():
            task.written_bytes = 0
        self._batch_started = None

    def _next_batch(self) -> list[Message]:
        """The records that have arrived, up to the batch limit; when none has, waits for the
        first (at most until the open batch is due) and takes what came with it. A consume of
        N records waits for all N or its whole timeout, which held records that had arrived."""
        consumer = self._consumer
        messages = consumer.consume(self._batch_limit, 0)
        began = self._last_commit_began
        self._last_commit_began = None
        if messages:
            if (
                began is not None
                and self._batch_started is None
                and len(messages) < self._batch_limit
            ):
                # They arrived while the last batch committed: their interval began with that
                # commit, not after it (with a backlog, whole batches, the interval counts as
                # usual, so that commits do not follow each other back to back).
                self._batch_started = began
            return messages
        first = consumer.poll(self._poll_timeout_s())
        if first is None:
            return []
        if self._batch_limit == 1:
            return [first]
        return [first, *consumer.consume(self._batch_limit - 1, 0)]

    def _poll_timeout_s(self) -> float:
        """How long a consume may wait: never past the moment the open batch is due, so a batch
        commits at its interval rather than up to a poll later. A batch still open past its
        interval is open because a backlog waits (`_commit_due`): it is due at the backlog
        interval, or once the backlog is read, which a poll that waited for nothing tells.
        Waiting no time there spun the loop while the consumer fetched the backlog's next
        records: 80,000 empty turns over a 100,000-event backlog, each reading the lag and the
        timers, a fifth of a single worker's CPU."""
        if self._batch_started is None:
            return POLL_TIMEOUT_S
        open_s = time.monotonic() - self._batch_started
        due_in = self._commit_interval_s - open_s
        if due_in <= 0:
            due_in = self._backlog_interval_s - open_s
        return min(POLL_TIMEOUT_S, max(due_in, 0.0))

    # -- records -----------------------------------------------------------------------------

    def _reselect_for(self, messages: list[Message]) -> Mapping[str, Reselected]:
        """With `--reselect`: what the source gives for the batch's unfillable placeholders."""
        if self._reselect is None or not messages:
            return {}
        tasks = self._assignment.tasks
        batch = []
        for msg in messages:
            if msg.error() is not None or msg.topic() == self._topology.handoff_topic:
                continue
            task = tasks.get(consumed.partition(msg))
            if task is None:
                continue
            batch.append((task, raw_record(msg)))
        if not batch:
            return {}
        stats = self._reselect.client.stats
        before = (stats.queries, stats.failures, stats.skipped)
        found = self._reselect.prepare(batch, batch[0][0].now_ms())
        counts = self._counts.batch()
        counts["reselect_queries"] += stats.queries - before[0]
        counts["reselect_failures"] += stats.failures - before[1]
        counts["reselect_skipped"] += stats.skipped - before[2]
        return found

    def _dispatch(self, msg: Message, reselected: Mapping[str, Reselected] | None = None) -> None:
        error = msg.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            check_topic_error(self._topology, msg.topic(), error)
            log.warning("consumer error: %s", error)
            return
        task = self._assignment.tasks.get(consumed.partition(msg))
        if task is None:
            log.warning("record of unowned partition %s-%d", msg.topic(), msg.partition())
            return
        if self._batch_started is None:
            self._batch_started = time.monotonic()
        self._uncommitted += 1
        record = raw_record(msg)
        if record.topic != self._topology.handoff_topic:
            self._counts.batch(record.topic)["records"] += 1
            supplement = reselected.get(record.source) if reselected else None
            task.process(record, task.now_ms(), supplement)
            return
        handoff = read_handoff(record)
        if isinstance(handoff, DeadLetter):
            task.dead_letter(handoff)
            return
        self._counts.batch()["handoffs_received"] += 1
        task.receive_handoff(handoff, task.now_ms())

    def _fit_batch(self, messages: list[Message]) -> None:
        """Count the batch's input bytes; size the next batch to about MAX_BATCH_BYTES."""
        self._uncommitted_bytes += sum(len(msg.value() or b"") for msg in messages)
        mean = max(self._footprint() // max(self._uncommitted, 1), 1)
        self._batch_limit = max(1, min(MAX_BATCH, MAX_BATCH_BYTES // mean))

    def _footprint(self) -> int:
        """Bytes of input and output of the open transaction."""
        written = sum(task.written_bytes for task in self._assignment.tasks.values())
        return self._uncommitted_bytes + written

    def _held_bytes(self) -> int:
        """Bytes of changed state the open transaction holds until it commits."""
        return sum(task.held_bytes for task in self._assignment.tasks.values())

    # -- timers ------------------------------------------------------------------------------

    def _fire_timers(self) -> None:
        tasks = self._assignment.tasks.values()
        waiting = [task for task in tasks if not task.catch_up.done]
        if waiting:
            pending = [tp for task in waiting for tp in task.catch_up.pending()]
            positions = self._consumer.position(pending)
            for task in waiting:
                task.catch_up.advance(positions)
        for task in tasks:
            if task.catch_up.done:
                task.fire_timers(task.now_ms())

    # -- commits -----------------------------------------------------------------------------

    def _commit_due(self) -> bool:
        if self._uncommitted >= MAX_UNCOMMITTED or self._held_bytes() >= self._held_cap:
            return True
        if self._batch_started is None:
            # Timers alone can change state or produce.
            tasks = self._assignment.tasks.values()
            return self._writer.in_transaction or any(t.has_changes() for t in tasks)
        open_s = time.monotonic() - self._batch_started
        if open_s < self._commit_interval_s:
            return False
        return open_s >= self._backlog_interval_s or not self._behind()

    def _behind(self) -> bool:
        """Whether a backlog waits in the owned input partitions (as last fetched)."""
        lag = partition_lag(self._consumer, self._assignment, self._topology)
        return sum(lag.values()) >= BACKLOG_RECORDS

    def commit(self, checkpoint_clocks: bool = False) -> None:
        """Commit the open batch. `checkpoint_clocks`: the tasks stop here or may move to another
        instance, so their clock readings are saved even if nothing else changed."""
        tasks = self._assignment.tasks
        changed = [p for p, task in tasks.items() if task.has_changes(checkpoint_clocks)]
        if not (self._uncommitted or self._writer.in_transaction or changed):
            return
        commit_began = time.monotonic()
        # The batch's lingering outputs travel while its state is encoded.
        self._writer.send_now()
        encoded = {p: tasks[p].changes() for p in changed}
        offsets = [
            tp
            for tp in self._consumer.position(list(self._assignment.partitions))
            if tp.offset >= 0
        ]
        witness = self._committed.witness(offsets)
        began = time.monotonic()
        written = self._writer.commit(
            encoded, offsets, self._consumer.consumer_group_metadata(), witness
        )
        self._committed.load(offsets)
        latency_s = time.monotonic() - began
        for p, changes in encoded.items():
            tasks[p].committed(changes, written[p])
        self._uncommitted = 0
        self._uncommitted_bytes = 0
        for task in self._assignment.tasks.values():
            task.written_bytes = 0
        self._batch_started = None
        self._last_commit_began = commit_began
        self._counts.totals["commits"] += 1
        self._counts.committed()
        self._metrics.committed(latency_s)

    # -- rebalances --------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._metrics.enter(Phase.RESTORING)
        if partitions:
            # Of every partition, not only those assigned: a changelog record's witness may name
            # any (changelog.py).
            every = [
                TopicPartition(topic, p)
                for topic in self._topology.subscription
                for p in range(self._topology.partitions)
            ]
            with blocking("committed offsets", COMMITTED_TIMEOUT_S):
                self._committed.load(consumer.committed(every, COMMITTED_TIMEOUT_S))
        self._assignment.open(partitions, self._committed)
        new = {
            (tp.topic, tp.partition)
            for tp in partitions
            if self._committed.of(tp.topic, tp.partition) < 0
        }
        if self._from_first_record and new:
            consumer.assign(
                [
                    TopicPartition(tp.topic, tp.partition, FIRST_OFFSET)
                    if (tp.topic, tp.partition) in new
                    else tp
                    for tp in partitions
                ]
            )
        self._metrics.enter(Phase.RUNNING)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._failed:
            self._assignment.close(partitions)
            return
        try:
            self.commit(checkpoint_clocks=True)
        except StorageError as exc:
            # The next assignment reads on from the committed offsets and reopens the tasks.
            log.warning(
                "the local state store failed (%s): the open batch is aborted and redone from "
                "the committed offsets",
                exc,
            )
            self._counts.totals["storage_failures"] += 1
            self._abandon_batch()
            self._assignment.close_all()
            self._assignment.set_aside(exc)
            return
        self._assignment.suspend(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else owns them now: our open batch must not commit, and every task's
        # uncommitted state went with it.
        log.warning("partitions lost: %s", sorted({tp.partition for tp in partitions}))
        self._abandon_batch()
        self._assignment.close_all()

    # -- available-now -----------------------------------------------------------------------

    def _finished(self) -> bool:
        if self._available_now is None or not self._assignment.assigned_once:
            return False
        if time.monotonic() - self._last_finish_check < AVAILABLE_NOW_CHECK_S:
            return False
        self._last_finish_check = time.monotonic()
        siblings = self._available_now.siblings
        if siblings.run_done():
            return True
        owned = list(self._assignment.partitions)
        reached, pending = self._available_now.inputs_pending(owned)
        if reached:
            # Records keep arriving after the snapshot: stop fetching them, or the run never
            # ends. (Records already fetched past the goal are processed; that is harmless.)
            self._consumer.pause(reached)
        if pending:
            siblings.finish_together(False)
            return False
        self.commit()
        finished = (
            self._assignment.parked == 0
            and self._available_now.handoffs_done(owned)
            # the partitions of other (or stopped) members count too
            and self._available_now.group_done(owned)
        )
        return siblings.finish_together(finished)


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
