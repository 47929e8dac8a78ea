"""A task's state as its processing sees it: the open transaction's writes over the local store.

Like Kafka Streams' caching store stacked on its change-logging store (and Quix Streams'
partition transaction kept apart from processing), a `TaskStore` holds:

* the open transaction: each key's new state (`dirty`, read back before the store: read your
  writes) and the image the store holds under it, until the transaction commits; only then do
  they reach the local store, so the store never holds state whose outputs might be aborted;
* the changelog encoding of that transaction (`changes`): rows, and their large values out of
  line (state/large.py), each under its own store and changelog key (state/layout.py). At
  commit, a row's new image is compared with its committed one by digest: a new value is
  written once, an unchanged one not at all, and a value the new image no longer holds gets a
  tombstone in the same transaction and write batch as the row, so neither the store nor the
  compacted changelog keeps a value no row refers to, whatever crashes;
* the bytes the open transaction holds in memory (`held_bytes`), which size a batch;
* committed states kept decoded in a cache capped by bytes (least recently used go first): CDC
  traffic keeps coming back to the same rows, but rows can be large. Large values are read only
  when a rule asks for one (a fill, a whole `before`), through the same cache;
* the routes of raw keys (`RouteCache`), a pure function of the key bytes, capped by bytes too.

A read the store fails (a damaged block, a missing file, a row without its large value) raises
a `StorageError` (state/errors.py), also from inside the hydration rules, which let it through:
it is the store's failure, never the record's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from state.codec import decode_state, encode_state
from state.errors import StoreCorrupted, StoreInconsistent
from state.large import (
    DEFAULT_COMPRESSION,
    DEFAULT_THRESHOLD,
    NOT_AT_HAND,
    STORE_PREFIX,
    LargeValue,
    LargeValueError,
    LazyImage,
    added_bytes,
    image_bytes,
    is_store_key,
    large_cells,
    refs_of,
    split_store_key,
    store_key,
    unpack_value,
)
from state.layout import is_meta_key
from state.record import StateRecord
from state.stores.rocksdb import RocksDBStore

log = logging.getLogger(__name__)

# A task's decoded-state cache is capped by bytes: an entry counts its key, its encoded state (a
# decoded row takes about as much: its values are the same strings) and this overhead for the
# objects around them.
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
CACHE_ENTRY_OVERHEAD = 256
# Canonical keys remembered per task, capped by bytes too; keys longer than ROUTE_KEY_MAX are not
# remembered (they are rare, and would crowd out the rest).
ROUTE_CACHE_BYTES = 4 * 1024 * 1024
ROUTE_KEY_MAX = 1024
ROUTE_ENTRY_OVERHEAD = 160

# What `changes` is told to do with a state too large for the changelog: given its key, its
# state and the bytes of its largest record; the state is then forgotten.
OnOversize = Callable[[bytes, StateRecord | None, int], None]


@dataclass(frozen=True)
class Sweep:
    """What the open-time check of a store rebuilt from the changelog found and corrected."""

    collected: int = 0  # large values no row referred to, collected
    missing: int = 0  # large values a row referred to that the changelog lacks


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
        self.where = where
        self.dirty: dict[bytes, StateRecord | None] = {}
        # Per key in `dirty`: the image the store holds (its large values are what a commit
        # compares the new image with); and what `changes()` encoded, until it commits.
        self._committed_images: dict[bytes, Any] = {}
        self._encoded: dict[bytes, tuple[StateRecord | None, list[tuple[bytes, Any, int]]]] = {}
        # Large values a dead transaction wrote or collected: their stored bytes, written again.
        self._raw_repairs: dict[bytes, bytes | None] = {}
        self.large_value_threshold = large_value_threshold
        self.large_value_compression = large_value_compression
        # What the open transaction keeps in memory until it commits: the changed states (one
        # per key, however often it changed), each sized by its image's values.
        self.held_bytes = 0
        self._held: dict[bytes, int] = {}
        # store key -> (decoded state or large value, bytes it counts for)
        self._cache: dict[bytes, tuple[Any, int]] = {}
        self._cache_used = 0
        self.cache_bytes = cache_bytes
        # Rows in the store (committed), and of each row key changed in the open batch whether
        # the store had it before, so a commit keeps the count exact.
        self.state_keys = 0
        self.last_sweep = Sweep()
        self._stored_before: dict[bytes, bool] = {}

    # -- reads -------------------------------------------------------------------------------

    def state(self, key: bytes) -> StateRecord | None:
        """`key`'s state as the open transaction sees it."""
        if key in self.dirty:
            return self.dirty[key]
        cached = self._cache.get(key)
        if cached is not None:
            return cached[0]
        data = self.store.get_raw(key)
        state = self._decode(key, data) if data is not None else None
        self._remember(key, state, len(data) if data is not None else 0)
        return state

    def get_raw(self, key: bytes) -> bytes | None:
        """A key's committed bytes (a meta record's, say)."""
        return self.store.get_raw(key)

    def _decode(self, key: bytes, data: bytes) -> StateRecord:
        return decode_state(data, StoredValues(self, key))

    @property
    def cache_used(self) -> int:
        """Bytes the decoded-state cache counts now."""
        return self._cache_used

    @property
    def state_bytes(self) -> int:
        """RocksDB's estimate of the bytes the store holds (rows, large values, meta records)."""
        return self.store.estimated_bytes()

    # -- the open transaction ----------------------------------------------------------------

    def put(self, key: bytes, before: StateRecord | None, state: StateRecord | None) -> None:
        """`key`'s new state, replacing `before` (what `state(key)` gave)."""
        if key not in self.dirty:
            self._committed_images[key] = before.image if before is not None else None
            self._stored_before[key] = before is not None
        self.dirty[key] = state
        self._hold(key, state)

    def has_changes(self) -> bool:
        return bool(self.dirty or self._raw_repairs)

    def changes(self, room: int, on_oversize: OnOversize) -> dict[bytes, bytes | None]:
        """The changelog records of the open transaction: the changed states, encoded, and the
        large values they add and collect. A state whose largest record (key + value bytes)
        exceeds `room` is handed to `on_oversize` and forgotten instead."""
        encoded: dict[bytes, bytes | None] = dict(self._raw_repairs)
        for key, state in list(self.dirty.items()):
            data, values = self._encode(key, state)
            largest = len(key) + len(data) if data else 0
            for value_key, value in values.items():
                if value and len(value_key) + len(value) > largest:
                    largest = len(value_key) + len(value)
            if largest > room:
                on_oversize(key, state, largest)
                self.dirty[key] = None
                data, values = self._encode(key, None)
            encoded[key] = data
            encoded.update(values)
        return encoded

    def _encode(
        self, key: bytes, state: StateRecord | None
    ) -> tuple[bytes | None, dict[bytes, bytes | None]]:
        """`state`'s record, and the large-value records that go with it: the values its
        committed image lacks (compressed), and tombstones for those it no longer holds."""
        committed = self._committed_images.get(key)
        old_refs = committed.refs() if type(committed) is LazyImage else ()
        values: dict[bytes, bytes | None] = {}
        fresh: list[tuple[bytes, Any, int]] = []  # (digest, value, packed size) to cache
        kept: set[bytes] = set()  # digests the new image refers to
        image = state.image if state is not None else None
        threshold = self.large_value_threshold
        if type(image) is dict and threshold is not None:
            # made by the rules: its large values go out of line
            large = large_cells(image, threshold, committed, self.large_value_compression)
            if large:
                old = {ref.digest for ref in old_refs}
                stored = dict(image)
                for column, cell in large.items():
                    kept.add(cell.digest)
                    if cell.compressed is not None:
                        value_key = store_key(key, cell.digest)
                        if cell.digest not in old and value_key not in values:
                            values[value_key] = cell.compressed
                            fresh.append((cell.digest, image[column], cell.size))
                        cell = cell.out_of_line()
                    stored[column] = cell
                # What stays cached after the commit: the row as stored, values read on demand.
                assert state is not None
                state = with_image(state, LazyImage(stored, StoredValues(self, key)))
        else:
            kept.update(ref.digest for ref in refs_of(image))
        for ref in old_refs:
            if ref.digest not in kept:
                values[store_key(key, ref.digest)] = None
        self._encoded[key] = (state, fresh)
        return (encode_state(state) if state is not None else None), values

    def committed(self, encoded: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """The transaction holding `encoded` (from `changes()`, with the task's meta records)
        committed: write it to the store, keep its states cached, start a new transaction."""
        self.store.apply(encoded, changelog_offset)
        for key, existed in self._stored_before.items():
            self.state_keys += (encoded.get(key) is not None) - existed
        self._stored_before.clear()
        for key, (state, fresh) in self._encoded.items():
            data = encoded.get(key)
            self._remember(key, state, len(data) if data is not None else 0)
            for digest, value, size in fresh:
                self._remember(store_key(key, digest), value, size)
        for key, data in encoded.items():
            if data is None and is_store_key(key):
                self._forget(key)
        self.dirty.clear()
        self._held.clear()
        self.held_bytes = 0
        self._committed_images.clear()
        self._encoded.clear()
        self._raw_repairs.clear()

    def repair(self, keys: list[bytes]) -> None:
        """Write these keys' committed states again in the next transaction: the changelog
        holds a dead transaction's records of them (see the engine's changelog.py). Meta records
        need no repair: every transaction writes new ones."""
        for key in keys:
            if key in self.dirty or key in self._raw_repairs:
                continue  # written already
            if is_store_key(key):
                self._raw_repairs[key] = self.store.get_raw(key)
            elif not is_meta_key(key):
                data = self.store.get_raw(key)
                self.rewrite(key, self._decode(key, data) if data is not None else None)

    def rewrite(self, key: bytes, state: StateRecord | None) -> None:
        """Write `key` again in the next transaction, as `state`."""
        if key not in self.dirty:
            data = self.store.get_raw(key)
            committed = self._decode(key, data) if data is not None else None
            self._committed_images[key] = committed.image if committed is not None else None
            self._stored_before[key] = data is not None
        self.dirty[key] = state

    def _hold(self, key: bytes, state: StateRecord | None) -> None:
        """Count `key`'s new state in `held_bytes`: the values its image holds beyond the key's
        committed image (state.large.added_bytes: an unchanged TOAST value filled from state is
        the cached object itself, and counting it again made a hot key set pass the engine's cap
        and force a commit a second, recompressing every changed value that often), plus what
        waits in it: parked records and the old images of handoffs."""
        if state is None:
            size = 0
        else:
            size = added_bytes(state.image, self._committed_images.get(key))
            if state.parked or state.handoffs:
                size += sum(len(parked.value or b"") for parked in state.parked)
                size += sum(image_bytes(handoff.image) for handoff in state.handoffs)
        self.held_bytes += size - self._held.get(key, 0)
        self._held[key] = size

    # -- the open-time check -----------------------------------------------------------------

    def sweep(self, rebuilt: bool) -> Iterator[tuple[bytes, StateRecord]]:
        """Every stored row (for the task's indexes), counted in `state_keys`, with its large
        values checked against the rows on the way: every reference has its value, and every
        value a reference. A store that disagrees with itself has lost records the changelog
        still holds: it is damaged (StoreInconsistent, once the rows are read) and must be rebuilt
        from the changelog, never corrected by deleting. Only a store just `rebuilt` from the
        changelog is corrected (the changelog itself lacks what is missing: a record the restore
        had to skip); `self.last_sweep` says what was."""
        self.state_keys = 0
        self.last_sweep = Sweep()
        referenced: dict[bytes, bytes] = {}  # large value's key -> its row's key
        for key, state in self.store.items():
            self.state_keys += 1
            for ref in refs_of(state.image):
                referenced[store_key(key, ref.digest)] = key
            yield key, state
        orphans = [k for k in self.store.keys_with_prefix(STORE_PREFIX) if not referenced.pop(k, 0)]
        if not orphans and not referenced:
            return
        found = (
            f"{len(referenced)} large values its rows refer to are missing, and "
            f"{len(orphans)} large values no row refers to are there"
        )
        if not rebuilt:
            raise StoreInconsistent(f"{self.store.path}: {found}", self.store.path)
        for value_key in orphans:
            log.warning("%s: collecting a large value no row refers to", self.where)
            self._raw_repairs[value_key] = None
        for value_key, key in referenced.items():
            self._forget_missing_value(key, split_store_key(value_key)[1])
        self.last_sweep = Sweep(len(orphans), len(referenced))

    def _forget_missing_value(self, key: bytes, digest: bytes) -> None:
        data = self.store.get_raw(key)
        state = self.dirty.get(key) or (self._decode(key, data) if data is not None else None)
        assert state is not None and type(state.image) is LazyImage
        cells = {
            column: cell
            for column, cell in state.image.cells.items()
            if not (type(cell) is LargeValue and cell.digest == digest)
        }
        # the row still has the column: its value is now unknown (docs/rules.md, rule 6)
        lost = [column for column in state.image.cells if column not in cells]
        unknown = tuple(dict.fromkeys((*state.unknown, *lost)))
        log.warning(
            "%s: a large value of key %s is missing from the changelog: the row forgets its "
            "column, which the next event must ship (or it stays unresolved)",
            self.where,
            key.decode(errors="replace").replace("\x00", "/")[:200],
        )
        self.rewrite(key, with_image(state, LazyImage(cells, StoredValues(self, key)), unknown))

    # -- the cache ---------------------------------------------------------------------------

    def _remember(self, key: bytes, decoded: Any, encoded_size: int) -> None:
        """Cache a state (or a large value) under its store key."""
        cache = self._cache
        previous = cache.pop(key, None)  # re-inserted at the young end
        if previous is not None:
            self._cache_used -= previous[1]
        cost = len(key) + encoded_size + CACHE_ENTRY_OVERHEAD
        if cost > self.cache_bytes // 4:
            return  # one huge row must not push out everything else
        cache[key] = (decoded, cost)
        self._cache_used += cost
        if self._cache_used > self.cache_bytes:
            self._shrink_cache(self.cache_bytes * 3 // 4)

    def _forget(self, key: bytes) -> None:
        previous = self._cache.pop(key, None)
        if previous is not None:
            self._cache_used -= previous[1]

    def _shrink_cache(self, target: int) -> None:
        """Drop the least recently used entries until the cache counts at most `target` bytes
        (in one go, so a full cache is not trimmed on every read)."""
        cache = self._cache
        used = self._cache_used
        victims = []
        for key, (_, cost) in cache.items():
            if used <= target:
                break
            victims.append(key)
            used -= cost
        for key in victims:
            del cache[key]
        self._cache_used = used

    def resize_cache(self, cache_bytes: int) -> None:
        """A new share of the process's cache budget (the number of tasks changed)."""
        self.cache_bytes = cache_bytes
        if self._cache_used > cache_bytes:
            self._shrink_cache(cache_bytes * 3 // 4)

    def close(self) -> None:
        self.store.close()


class StoredValues:
    """Reads the large values of the row stored under `owner`: from the task store's cache, else
    from its store (and caches them). A value the store lacks, or whose bytes are damaged, is
    the store's failure: StoreCorrupted, which the hydration rules let through."""

    __slots__ = ("_owner", "_store")

    def __init__(self, store: TaskStore, owner: bytes) -> None:
        self._store = store
        self._owner = owner

    def read(self, ref: LargeValue) -> Any:
        key = store_key(self._owner, ref.digest)
        cached = self._store._cache.get(key)
        if cached is not None:
            return cached[0]
        local = self._store.store
        blob = local.get_raw(key)
        if blob is None:
            raise StoreInconsistent(
                f"{local.path}: large value {ref.digest.hex()} of a row is missing from the store",
                local.path,
            )
        try:
            value = unpack_value(blob)
        except LargeValueError as exc:
            raise StoreCorrupted(f"{local.path}: {exc}", local.path) from exc
        self._store._remember(key, value, ref.size)
        return value

    def peek(self, ref: LargeValue) -> Any:
        cached = self._store._cache.get(store_key(self._owner, ref.digest))
        return cached[0] if cached is not None else NOT_AT_HAND


class RouteCache:
    """Canonical keys by raw Kafka key, capped by bytes (emptied when full)."""

    __slots__ = ("_routes", "_used")

    def __init__(self) -> None:
        self._routes: dict[bytes, str] = {}
        self._used = 0

    def get(self, raw_key: bytes) -> str | None:
        return self._routes.get(raw_key)

    def remember(self, raw_key: bytes, route: str) -> None:
        if len(raw_key) > ROUTE_KEY_MAX:
            return
        cost = len(raw_key) + len(route) + ROUTE_ENTRY_OVERHEAD
        if self._used + cost > ROUTE_CACHE_BYTES:
            self._routes.clear()
            self._used = 0
        self._routes[raw_key] = route
        self._used += cost


def with_image(
    state: StateRecord, image: Any, unknown: tuple[str, ...] | None = None
) -> StateRecord:
    """`state` with `image` (the same row, its large values stored apart, or one forgotten),
    and `unknown` columns when given."""
    return StateRecord(
        image,
        state.pos,
        state.deleted,
        state.updated_at_ms,
        state.handoffs,
        state.parked,
        state.awaiting,
        state.waiting_since_ms,
        state.cell_times,
        state.bootstrap,
        state.unknown if unknown is None else unknown,
    )
