"""The tasks this instance owns, opened (restored) and closed as the consumer group rebalances.

The group protocol is eager: every rebalance revokes everything, then assigns. A revoked task is
only suspended (committed, store open); if the next assignment gives its partition back, nobody
can have written its changelog in between, so it resumes without restoring or re-indexing.

A newly opened task notes the ends of its partitions at assignment: its timers wait until it has
read up to them (clock.py). The process's decoded-state cache budget is shared out among the
tasks it runs.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from confluent_kafka import TopicPartition

from hydrator.core.hydrator import Hydrator
from hydrator.engines.embedded.changelog import CommittedOffsets
from hydrator.engines.embedded.clock import CatchUp
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.local_handoffs import LocalHandoffs
from hydrator.engines.embedded.restore import Restored, Restorer
from hydrator.engines.embedded.state_dir import StateDirectory
from hydrator.engines.embedded.task import DEFAULT_CACHE_BYTES, Task
from hydrator.errors import HydratorError
from hydrator.kafka.offsets import OffsetProbe
from hydrator.topology.emit import Sink
from hydrator.topology.layout import Topology
from state.errors import StorageError, StoreCorrupted
from state.large import DEFAULT_COMPRESSION, DEFAULT_THRESHOLD

log = logging.getLogger(__name__)


class CoPartitioningError(HydratorError, RuntimeError):
    """The group handed out partition p of some subscribed topics but not of the others."""


class Assignment:
    def __init__(
        self,
        topology: Topology,
        state_dir: StateDirectory,
        restorer: Restorer,
        hydrator: Hydrator,
        sink: Sink,
        counts: RunCounts,
        probe: OffsetProbe | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        large_value_threshold: int | None = DEFAULT_THRESHOLD,
        large_value_compression: str = DEFAULT_COMPRESSION,
        on_change: Callable[[set[int]], None] = lambda owned: None,
    ) -> None:
        """`probe` gives the partition ends a new task must catch up with before its timers
        fire (without one, timers never wait); `cache_bytes` is the decoded-state cache budget
        of the whole process; `large_value_threshold` what a task keeps out of line, compressed
        with `large_value_compression`;
        `on_change` hears the task numbers owned after each change."""
        self.tasks: dict[int, Task] = {}
        # Handoffs whose new key one of these tasks owns are applied without the handoff topic.
        self._local_handoffs = LocalHandoffs(self.tasks)
        self._suspended: dict[int, Task] = {}
        self.partitions: list[TopicPartition] = []
        # The group's committed offsets as last given (the loop's, moved by its commits).
        self.committed = CommittedOffsets()
        self.assigned_once = False
        self._topology = topology
        self._state_dir = state_dir
        self._restorer = restorer
        self._hydrator = hydrator
        self._sink = sink
        self._counts = counts
        self._probe = probe
        self._cache_bytes = cache_bytes
        self._large_value_threshold = large_value_threshold
        self._large_value_compression = large_value_compression
        self._on_change = on_change

    @property
    def local_handoffs(self) -> LocalHandoffs:
        """The queue of handoffs between this process's tasks."""
        return self._local_handoffs

    def open(self, partitions: list[TopicPartition], committed: CommittedOffsets) -> None:
        """Take over `partitions`; `committed` holds the group's committed offsets of every
        partition (a restore judges a changelog record by any of them)."""
        self.committed = committed
        by_number = self._check_co_partitioned(partitions)
        # Held from now on, while their stores open (and restore).
        self._on_change(set(self.tasks) | set(by_number))
        for p in sorted(set(self._suspended) - set(by_number)):
            self._suspended.pop(p).close()
        fresh = [p for p in sorted(by_number) if p not in self._suspended]
        bounds = self._bounds(fresh)
        share = self._cache_bytes // max(1, len(self.tasks) + len(by_number))
        for p in sorted(by_number):
            resumed = self._suspended.pop(p, None)
            if resumed is None:
                resumed = self._new_task(p, committed, share)
                resumed.catch_up = CatchUp(
                    {tp: b for tp, b in bounds.items() if tp[1] == p}, committed.partition(p)
                )
            self.tasks[p] = resumed
        self._share_cache()
        self.partitions += [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        self.assigned_once = True
        self._on_change(set(self.tasks))
        log.info("assigned partitions %s", sorted(by_number))

    def suspend(self, partitions: list[TopicPartition]) -> None:
        """After the commit of a revoke: keep the tasks for a possible return."""
        for p in self._release(partitions):
            self._suspended[p] = self.tasks.pop(p)
        self._on_change(set(self.tasks))

    def close(self, partitions: list[TopicPartition]) -> None:
        """Close the tasks of `partitions`; their uncommitted state (if any) is dropped."""
        for p in self._release(partitions):
            self.tasks.pop(p).close()
        self._on_change(set(self.tasks))
        self._share_cache()

    def close_all(self) -> None:
        self.close(list(self.partitions))
        for task in self._suspended.values():
            task.close()
        self._suspended.clear()

    def _new_task(self, p: int, committed: CommittedOffsets, cache_bytes: int) -> Task:
        path = self._state_dir.store_path(self._topology.changelog_topic, p)
        restored = self._restorer.open(path, p, committed)
        try:
            task = self._task(p, restored, cache_bytes)
        except StoreCorrupted as exc:
            # Found damaged while the task read its store (it disagrees with itself, say):
            # rebuilt from the changelog, never corrected by deleting.
            self._restorer.set_aside(path, p, exc)
            restored = self._restorer.open(path, p, committed)
            task = self._task(p, restored, cache_bytes)
        task.repair(restored.repairs)
        return task

    def _task(self, p: int, restored: Restored, cache_bytes: int) -> Task:
        return Task(
            p,
            self._hydrator,
            restored.store,
            self._topology,
            self._sink,
            self._counts,
            cache_bytes,
            self._large_value_threshold,
            self._large_value_compression,
            self._local_handoffs,
            restored.rebuilt,
        )

    def set_aside(self, failure: StorageError) -> None:
        """After a store failed while running (its task closed now): a damaged one is moved
        aside, so that the task's next open rebuilds it from the changelog. Other failures (a
        full disk, say) leave it: its files are sound."""
        if not isinstance(failure, StoreCorrupted) or failure.path is None:
            return
        for p in range(self._topology.partitions):
            path = self._state_dir.store_path(self._topology.changelog_topic, p)
            if path == failure.path:
                self._restorer.set_aside(path, p, failure)
                return

    def _bounds(self, partitions: list[int]) -> dict[tuple[str, int], tuple[int, int]]:
        """(low watermark, end) of these partition numbers of every subscribed topic, now."""
        if self._probe is None or not partitions:
            return {}
        return self._probe.bounds(
            [(topic, p) for p in partitions for topic in self._topology.subscription]
        )

    def _share_cache(self) -> None:
        if self.tasks:
            share = self._cache_bytes // len(self.tasks)
            for task in self.tasks.values():
                task.resize_cache(share)

    def _release(self, partitions: list[TopicPartition]) -> list[int]:
        numbers = sorted({tp.partition for tp in partitions} & set(self.tasks))
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.partitions = [tp for tp in self.partitions if (tp.topic, tp.partition) not in gone]
        if numbers:
            log.info("revoked partitions %s", numbers)
        return numbers

    @property
    def cache_bytes(self) -> int:
        """The process's share of the run's state cache budget."""
        return self._cache_bytes

    @property
    def parked(self) -> int:
        return sum(task.parked_count for task in self.tasks.values())

    @property
    def state_keys(self) -> int:
        """State keys in the stores of the tasks owned now (as committed)."""
        return sum(task.state_keys for task in self.tasks.values())

    @property
    def state_bytes(self) -> int:
        """Their keys' and encoded states' bytes."""
        return sum(task.state_bytes for task in self.tasks.values())

    def _check_co_partitioned(self, partitions: list[TopicPartition]) -> dict[int, set[str]]:
        # The range assignor gives every member the same partition numbers of each subscribed
        # topic when the counts are equal; a task needs all of them to see its keys' handoffs.
        expected = set(self._topology.subscription)
        by_number: dict[int, set[str]] = defaultdict(set)
        for tp in partitions:
            by_number[tp.partition].add(tp.topic)
        for p, topics in by_number.items():
            if topics != expected:
                raise CoPartitioningError(
                    f"partition {p} assigned for {sorted(topics)} but not for "
                    f"{sorted(expected - topics)}"
                )
        return dict(by_number)
