"""A task's state as its processing sees it: the top of the stack (state/embedded/__init__.py).

A read goes through the open transaction's writes (read your writes), then the cache of decoded
committed states, then RocksDB; a write goes to the open transaction; a commit writes the
transaction to RocksDB and keeps what it wrote in the cache. Large values are read only when a
rule asks for one (a fill, a whole `before`), through the same cache.

A read the store fails (a damaged block, a missing file, a row without its large value) raises
a `StorageError` (state/errors.py), also from inside the hydration rules, which let it through:
it is the store's failure, never the record's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from state.embedded.cache import DEFAULT_CACHE_BYTES, StateCache
from state.embedded.changelog import ChangelogLayer, OnOversize, Sweep
from state.errors import StoreCorrupted, StoreInconsistent
from state.large import (
    DEFAULT_COMPRESSION,
    DEFAULT_THRESHOLD,
    NOT_AT_HAND,
    LargeValue,
    LargeValueError,
    store_key,
    stored_bytes_are,
    unpack_value,
)
from state.record import StateRecord
from state.stores.rocksdb import RocksDBStore


class TaskStore:
    def __init__(
        self,
        store: RocksDBStore,
        where: str,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        large_value_threshold: int | None = DEFAULT_THRESHOLD,
        large_value_compression: str = DEFAULT_COMPRESSION,
    ) -> None:
        """`where` names the task's changelog partition in log lines."""
        self.store = store
        self.cache = StateCache(cache_bytes)
        self.log = ChangelogLayer(
            store,
            where,
            lambda owner: StoredValues(self, owner),
            large_value_threshold,
            large_value_compression,
        )

    # -- reads -------------------------------------------------------------------------------

    def state(self, key: bytes) -> StateRecord | None:
        """`key`'s state as the open transaction sees it."""
        dirty = self.log.dirty
        if key in dirty:
            return dirty[key]
        cached = self.cache.get(key)
        if cached is not None:
            return cached[0]
        state, size = self.log.load(key)
        self.cache.remember(key, state, size)
        return state

    def get_raw(self, key: bytes) -> bytes | None:
        """A key's committed bytes (a meta record's, say)."""
        return self.store.get_raw(key)

    @property
    def state_bytes(self) -> int:
        """RocksDB's estimate of the bytes the store holds (rows, large values, meta records)."""
        return self.store.estimated_bytes()

    @property
    def dirty(self) -> dict[bytes, StateRecord | None]:
        """The open transaction's changed states."""
        return self.log.dirty

    @property
    def held_bytes(self) -> int:
        return self.log.held_bytes

    @property
    def state_keys(self) -> int:
        return self.log.state_keys

    @property
    def last_sweep(self) -> Sweep:
        return self.log.last_sweep

    @property
    def cache_used(self) -> int:
        """Bytes the decoded-state cache counts now."""
        return self.cache.used

    @property
    def cache_bytes(self) -> int:
        return self.cache.capacity

    # -- writes and commits ------------------------------------------------------------------

    def put(self, key: bytes, before: StateRecord | None, state: StateRecord | None) -> None:
        """`key`'s new state, replacing `before` (what `state(key)` gave)."""
        self.log.put(key, before, state)

    def has_changes(self) -> bool:
        return self.log.has_changes()

    def changes(self, room: int, on_oversize: OnOversize) -> dict[bytes, bytes | None]:
        """The open transaction's changelog records (ChangelogLayer.changes)."""
        return self.log.changes(room, on_oversize)

    def committed(self, encoded: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """The transaction holding `encoded` committed: into RocksDB, and what it wrote into
        the cache."""
        cacheable, gone = self.log.committed(encoded, changelog_offset)
        cache = self.cache
        for key, decoded, size in cacheable:
            cache.remember(key, decoded, size)
        for key in gone:
            cache.forget(key)

    def repair(self, keys: list[bytes]) -> None:
        self.log.repair(keys)

    def sweep(self, rebuilt: bool) -> Iterator[tuple[bytes, StateRecord]]:
        return self.log.sweep(rebuilt)

    def resize_cache(self, cache_bytes: int) -> None:
        self.cache.resize(cache_bytes)

    def close(self) -> None:
        self.store.close()


class StoredValues:
    """Reads the large values of the row stored under `owner`: from the task store's cache, else
    from RocksDB (and caches them). A value the store lacks, or whose bytes are damaged, is
    the store's failure: StoreCorrupted, which the hydration rules let through."""

    __slots__ = ("_owner", "_store")

    def __init__(self, store: TaskStore, owner: bytes) -> None:
        self._store = store
        self._owner = owner

    def read(self, ref: LargeValue) -> Any:
        key = store_key(self._owner, ref.digest)
        cached = self._store.cache.get(key)
        if cached is not None:
            return cached[0]
        blob = self._blob(ref, key)
        try:
            value = unpack_value(blob)
        except LargeValueError as exc:
            local = self._store.store
            raise StoreCorrupted(f"{local.path}: {exc}", local.path) from exc
        self._store.cache.remember(key, value, ref.size)
        return value

    def peek(self, ref: LargeValue) -> Any:
        cached = self._store.cache.get(store_key(self._owner, ref.digest))
        return cached[0] if cached is not None else NOT_AT_HAND

    def holds(self, ref: LargeValue, packed: bytes) -> bool:
        return stored_bytes_are(self._blob(ref, store_key(self._owner, ref.digest)), packed)

    def _blob(self, ref: LargeValue, key: bytes) -> bytes:
        local = self._store.store
        blob = local.get_raw(key)
        if blob is None:
            raise StoreInconsistent(
                f"{local.path}: large value {ref.digest.hex()} of a row is missing from the store",
                local.path,
            )
        return blob
