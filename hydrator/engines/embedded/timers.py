"""When each key of a task next needs `Hydrator.tick` (park timeout, tombstone retention, TTL)."""

from __future__ import annotations

import heapq


class DeadlineIndex:
    """A min-heap of (deadline, key) with lazy deletion: moving a deadline only records the new
    one; stale heap entries are skipped when they surface."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, bytes]] = []
        self._deadline: dict[bytes, int] = {}

    def set(self, key: bytes, deadline_ms: int | None) -> None:
        if deadline_ms is None:
            self._deadline.pop(key, None)
            return
        if self._deadline.get(key) == deadline_ms:
            return
        self._deadline[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, key))
        if len(self._heap) > 2 * len(self._deadline) + 1024:
            self._compact()

    def pop_due(self, now_ms: int) -> list[bytes]:
        due = []
        while self._heap and self._heap[0][0] <= now_ms:
            deadline, key = heapq.heappop(self._heap)
            if self._deadline.get(key) == deadline:
                del self._deadline[key]
                due.append(key)
        return due

    def next_ms(self) -> int | None:
        while self._heap and self._deadline.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
        self._deadline.clear()

    def __len__(self) -> int:
        return len(self._deadline)

    def _compact(self) -> None:
        self._heap = [(d, k) for k, d in self._deadline.items()]
        heapq.heapify(self._heap)
