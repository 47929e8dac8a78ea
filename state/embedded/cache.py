"""Committed states and large values kept decoded between records, capped by bytes.

CDC traffic keeps coming back to the same rows, but rows can be large: an entry counts its key,
its encoded bytes (a decoded row takes about as much: its values are the same strings) and
ENTRY_OVERHEAD for the objects around them, and the least recently used go first.
"""

from __future__ import annotations

from typing import Any

DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
ENTRY_OVERHEAD = 256


class StateCache:
    __slots__ = ("_entries", "capacity", "used")

    def __init__(self, capacity: int = DEFAULT_CACHE_BYTES) -> None:
        # store key -> (decoded state or large value, bytes it counts for), oldest first
        self._entries: dict[bytes, tuple[Any, int]] = {}
        self.capacity = capacity
        self.used = 0

    def get(self, key: bytes) -> tuple[Any, int] | None:
        """(the decoded entry, what it counts for), or None when `key` is not cached."""
        return self._entries.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> dict[bytes, tuple[Any, int]]:
        """The entries themselves (read-only: for inspection and tests)."""
        return self._entries

    def remember(self, key: bytes, decoded: Any, encoded_size: int) -> None:
        """Cache a state (or a large value) under its store key, as the most recently used."""
        entries = self._entries
        previous = entries.pop(key, None)
        if previous is not None:
            self.used -= previous[1]
        cost = len(key) + encoded_size + ENTRY_OVERHEAD
        if cost > self.capacity // 4:
            return  # one huge row must not push out everything else
        entries[key] = (decoded, cost)
        self.used += cost
        if self.used > self.capacity:
            self._shrink(self.capacity * 3 // 4)

    def forget(self, key: bytes) -> None:
        previous = self._entries.pop(key, None)
        if previous is not None:
            self.used -= previous[1]

    def resize(self, capacity: int) -> None:
        """A new share of the process's cache budget (the number of tasks changed)."""
        self.capacity = capacity
        if self.used > capacity:
            self._shrink(capacity * 3 // 4)

    def _shrink(self, target: int) -> None:
        """Drop the least recently used entries until the cache counts at most `target` bytes
        (in one go, so a full cache is not trimmed on every read)."""
        entries = self._entries
        used = self.used
        victims = []
        for key, (_, cost) in entries.items():
            if used <= target:
                break
            victims.append(key)
            used -= cost
        for key in victims:
            del entries[key]
        self.used = used
