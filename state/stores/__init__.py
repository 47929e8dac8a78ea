"""Where state records live: the StateStore interface and its implementations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from state.record import StateRecord


class StateStore(Protocol):
    def get(self, key: bytes) -> StateRecord | None: ...

    def put(self, key: bytes, record: StateRecord) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def items(self) -> Iterator[tuple[bytes, StateRecord]]: ...

    def close(self) -> None: ...
