"""The run's counters (names: hydrator/core/counters.py), counted per batch and added to the
run's totals only when the batch's transaction commits: a batch that is aborted (an outage, lost
partitions) is redone from the committed offsets, and must not be counted twice. So the totals
always describe what the output topics hold.

What a batch counts is kept per input topic, where the engine knows it ("" where it does not: a
handoff record that cannot be read, a commit); the exporter labels the counters with it.
"""

from __future__ import annotations

from collections import Counter

UNATTRIBUTED = ""


class RunCounts:
    def __init__(self) -> None:
        # Committed counts of the whole run: the progress line reads these. Counts that are no
        # batch's work (commits, restarts, restores) are added here directly.
        self.totals: Counter[str] = Counter()
        # The part of `totals` that belongs to one input topic.
        self.by_topic: dict[str, Counter[str]] = {}
        self._batch: dict[str, Counter[str]] = {}

    def batch(self, topic: str = UNATTRIBUTED) -> Counter[str]:
        """Where the open batch counts what it did for `topic`'s records."""
        counts = self._batch.get(topic)
        if counts is None:
            counts = self._batch[topic] = Counter()
        return counts

    def committed(self) -> None:
        """The open batch committed: its counts join the totals."""
        for topic, counts in self._batch.items():
            if not counts:
                continue
            self.totals.update(counts)
            if topic != UNATTRIBUTED:
                self.by_topic.setdefault(topic, Counter()).update(counts)
            counts.clear()

    def discarded(self) -> None:
        """The open batch was aborted: what it counted never happened."""
        for counts in self._batch.values():
            counts.clear()

    def pending(self) -> Counter[str]:
        """What the open batch has counted so far, all topics together."""
        total: Counter[str] = Counter()
        for counts in self._batch.values():
            total.update(counts)
        return total
