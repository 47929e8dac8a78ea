"""A dict-backed store for tests and the stateless paths; records round-trip through the codec
so tests exercise the same bytes a durable store keeps."""

from __future__ import annotations

from collections.abc import Iterator

from state.codec import decode_state, encode_state
from state.record import StateRecord


class MemoryStore:
    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> StateRecord | None:
        data = self._data.get(key)
        return decode_state(data) if data is not None else None

    def put(self, key: bytes, record: StateRecord) -> None:
        self._data[key] = encode_state(record)

    def delete(self, key: bytes) -> None:
        self._data.pop(key, None)

    def items(self) -> Iterator[tuple[bytes, StateRecord]]:
        for key, data in list(self._data.items()):
            yield key, decode_state(data)

    def __len__(self) -> int:
        return len(self._data)

    def close(self) -> None:
        self._data.clear()
