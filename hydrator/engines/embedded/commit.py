"""Committing the open batch: one Kafka transaction carrying every changed task's changelog
records, the outputs the batch produced (sent as they were made) and the input offsets read
past, or aborting it.

The order is what makes a batch exactly once: the changelog records are encoded, the
transaction commits them with the outputs and the offsets (transaction.py: flush, offsets,
commit), and only then are the changes written to each task's local store and the batch's counts
added to the totals. A batch that fails anywhere before is aborted whole: nothing of it is
visible, the stores hold the last committed state, and the inputs are read again from the
committed offsets. Each changelog record carries a witness, a position past what its transaction
commits, so a restore can tell a committed record from one of an aborted transaction
(changelog.py).
"""

from __future__ import annotations

import time

from hydrator.engines.embedded.batch import OpenBatch
from hydrator.engines.embedded.changelog import CommittedOffsets
from hydrator.engines.embedded.dlq_replay import DlqInput
from hydrator.engines.embedded.run_parts import RunParts


class BatchCommit:
    def __init__(self, parts: RunParts, batch: OpenBatch, replay: DlqInput | None = None) -> None:
        """`replay`: the dead-letter topic is the input (`hydrator dlq replay`): its offsets
        commit as it says (dlq_replay.py)."""
        self._parts = parts
        self._batch = batch
        self._replay = replay
        # What the group has committed: each transaction's witness is a position past it.
        self.committed = CommittedOffsets()

    def commit(self, checkpoint_clocks: bool = False) -> None:
        """Commit the open batch. `checkpoint_clocks`: the tasks stop here or may move to another
        instance, so their clock readings are saved even if nothing else changed."""
        parts, batch = self._parts, self._batch
        writer, tasks = parts.writer, parts.assignment.tasks
        changed = [p for p, task in tasks.items() if task.has_changes(checkpoint_clocks)]
        if not (batch.records or writer.in_transaction or changed):
            return
        commit_began = time.monotonic()
        # The batch's lingering outputs travel while its state is encoded.
        writer.send_now()
        encoded = {p: tasks[p].changes() for p in changed}
        offsets = [
            tp
            for tp in parts.consumer.position(list(parts.assignment.partitions))
            if tp.offset >= 0
        ]
        if self._replay is not None:
            offsets = self._replay.committing(offsets, self.committed)
        witness = self.committed.witness(offsets)
        began = time.monotonic()
        written = writer.commit(encoded, offsets, parts.consumer.consumer_group_metadata(), witness)
        self.committed.load(offsets)
        latency_s = time.monotonic() - began
        for p, changes in encoded.items():
            tasks[p].committed(changes, written[p])
        batch.closed()
        batch.last_commit_began = commit_began
        parts.counts.totals["commits"] += 1
        parts.counts.committed()
        parts.metrics.committed(latency_s)

    def abandon(self) -> None:
        """Abort the open transaction; the batch's counts and sizes go with it."""
        self._parts.writer.abort()
        self._parts.counts.discarded()
        self._batch.closed()
