"""The open batch: what it holds until it commits, and when it is due.

A batch is due every `commit_interval_ms` (and before a rebalance takes partitions away). While a
backlog waits (BACKLOG_RECORDS or more input records behind: after downtime, or input faster than
the engine), it stays open up to `backlog_commit_interval_ms` instead: a transaction costs the
same whatever it holds, and a key that changes again within one is written to state and changelog
once, so the backlog drains sooner. Its records have waited anyway; once the engine has caught up,
batches commit at `commit_interval_ms` again. Past MAX_UNCOMMITTED records, or once the changed
states it holds reach their cap, a batch is due whatever the interval.
"""

from __future__ import annotations

import time

from hydrator.engines.embedded.metrics import partition_lag
from hydrator.engines.embedded.run_parts import RunParts

POLL_TIMEOUT_S = 0.05
# Past this many records a commit is due whatever the interval: bounds the work redone after a
# crash (at a few thousand records a second, some seconds of it).
MAX_UNCOMMITTED = 50_000
# Wide rows (whole TOASTed values) must not make memory follow row size. What an open
# transaction holds until it commits is its changed states, one per key however often the key
# changed, each counted by the values its image holds beyond the key's committed image (which the
# state cache holds already; Task.held_bytes). As in Kafka Streams, where dirty entries live in
# the record cache, that memory is the state budget's: a commit is due once they reach half the
# process's share of --state-cache-bytes (held_bytes_cap), one setting for all the state's
# memory (docs/operations.md: memory, commit rate and state bytes). A cap below a hot key set's
# changed rows makes every commit re-encode each of them (a single worker on 10,000 hot keys of
# 9 KB rows under a fixed 64 MB cap committed once a second instead of every 5 s, and spent a
# quarter more CPU per event). Outputs leave for the broker as they are produced and
# are freed once acknowledged (the loop serves delivery reports every turn; librdkafka's queue
# bounds the rest), and consumed records are dropped once processed, so neither counts; a key
# that changes again within the interval is written to the changelog and the store once. A
# consume batch is sized to about MAX_BATCH_BYTES of input plus outputs (loop.py), at the open
# transaction's mean.
MIN_HELD_BYTES = 1024 * 1024  # however small the budget: a commit per row would be absurd
# Input records waiting in the owned partitions from which the engine counts as behind. A few
# batches' worth: a steady stream the engine keeps up with never lags this much between commits.
BACKLOG_RECORDS = 5_000


def held_bytes_cap(cache_bytes: int) -> int:
    """The changed-state bytes past which an open transaction commits, for a process whose share
    of --state-cache-bytes is `cache_bytes`: half of it (at least MIN_HELD_BYTES)."""
    return max(MIN_HELD_BYTES, cache_bytes // 2)


class OpenBatch:
    def __init__(
        self,
        parts: RunParts,
        commit_interval_ms: int,
        backlog_commit_interval_ms: int | None = None,
    ) -> None:
        """`backlog_commit_interval_ms`: how long a batch may stay open while a backlog waits
        (None, or no longer than `commit_interval_ms`: batches never stretch)."""
        self._parts = parts
        self.commit_interval_s = commit_interval_ms / 1000
        self.backlog_interval_s = max(backlog_commit_interval_ms or 0, commit_interval_ms) / 1000
        self.held_cap = held_bytes_cap(parts.assignment.cache_bytes)
        self.records = 0  # input records taken since the last commit
        self.input_bytes = 0  # theirs
        self.started: float | None = None  # when its first record was taken
        # When the last commit began: records found waiting right after it arrived during it.
        self.last_commit_began: float | None = None

    def took(self) -> None:
        """A consumed record joined the batch."""
        if self.started is None:
            self.started = time.monotonic()
        self.records += 1

    def footprint(self) -> int:
        """Bytes of input and output of the open transaction."""
        written = sum(task.written_bytes for task in self._parts.assignment.tasks.values())
        return self.input_bytes + written

    def held_bytes(self) -> int:
        """Bytes of changed state the open transaction holds until it commits."""
        return sum(task.held_bytes for task in self._parts.assignment.tasks.values())

    def closed(self) -> None:
        """The batch committed or was dropped: the next one starts empty."""
        self.records = 0
        self.input_bytes = 0
        for task in self._parts.assignment.tasks.values():
            task.written_bytes = 0
        self.started = None

    def due(self) -> bool:
        if self.records >= MAX_UNCOMMITTED or self.held_bytes() >= self.held_cap:
            return True
        if self.started is None:
            # Timers alone can change state or produce.
            tasks = self._parts.assignment.tasks.values()
            return self._parts.writer.in_transaction or any(t.has_changes() for t in tasks)
        open_s = time.monotonic() - self.started
        if open_s < self.commit_interval_s:
            return False
        return open_s >= self.backlog_interval_s or not self.behind()

    def behind(self) -> bool:
        """Whether a backlog waits in the owned input partitions (as last fetched)."""
        parts = self._parts
        lag = partition_lag(parts.consumer, parts.assignment, parts.topology)
        return sum(lag.values()) >= BACKLOG_RECORDS

    def poll_timeout_s(self) -> float:
        """How long a consume may wait: never past the moment the open batch is due, so a batch
        commits at its interval rather than up to a poll later. A batch still open past its
        interval is open because a backlog waits (`due`): it is due at the backlog interval, or
        once the backlog is read, which a poll that waited for nothing tells. Waiting no time
        there spun the loop while the consumer fetched the backlog's next records: 80,000 empty
        turns over a 100,000-event backlog, each reading the lag and the timers, a fifth of a
        single worker's CPU."""
        if self.started is None:
            return POLL_TIMEOUT_S
        open_s = time.monotonic() - self.started
        due_in = self.commit_interval_s - open_s
        if due_in <= 0:
            due_in = self.backlog_interval_s - open_s
        return min(POLL_TIMEOUT_S, max(due_in, 0.0))
