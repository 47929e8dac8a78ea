"""The open transaction of a task's state, and its changelog records.

Like Kafka Streams' change-logging store (and Quix Streams' partition transaction kept apart
from processing), a `ChangelogLayer` holds:

* the open transaction: each key's new state (`dirty`) and the image the store holds under it,
  until the transaction commits; only then do they reach RocksDB, so the store never holds
  state whose outputs might be aborted;
* the changelog encoding of that transaction (`changes`): rows, and their large values out of
  line (state/large.py), each under its own store and changelog key (state/layout.py). At
  commit, a row's new image is compared with its committed one: a new value is written once,
  an unchanged one not at all, and a value the new image no longer holds gets a tombstone in
  the same transaction and write batch as the row, so neither the store nor the compacted
  changelog keeps a value no row refers to, whatever crashes;
* the bytes the open transaction holds in memory (`held_bytes`), which size a batch.

It keeps nothing decoded past a commit: `committed` says what the layer above may cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from state.codec import decode_state, encode_state
from state.errors import StoreInconsistent
from state.large import (
    DEFAULT_COMPRESSION,
    DEFAULT_THRESHOLD,
    STORE_PREFIX,
    LargeValue,
    LargeValueReader,
    LazyImage,
    added_bytes,
    image_bytes,
    is_store_key,
    large_cells,
    refs_of,
    split_store_key,
    store_key,
)
from state.layout import is_meta_key
from state.record import StateRecord
from state.stores.rocksdb import RocksDBStore

log = logging.getLogger(__name__)

# What `changes` is told to do with a state too large for the changelog: given its key, its
# state and the bytes of its largest record; the state is then forgotten.
OnOversize = Callable[[bytes, StateRecord | None, int], None]
# What a commit leaves for the cache: (store key, decoded state or large value, encoded bytes)
# to remember, and the store keys to forget.
Cacheable = list[tuple[bytes, Any, int]]


@dataclass(frozen=True)
class Sweep:
    """What the open-time check of a store rebuilt from the changelog found and corrected."""

    collected: int = 0  # large values no row referred to, collected
    missing: int = 0  # large values a row referred to that the changelog lacks


class ChangelogLayer:
    def __init__(
        self,
        store: RocksDBStore,
        where: str,
        values_of: Callable[[bytes], LargeValueReader],
        large_value_threshold: int | None = DEFAULT_THRESHOLD,
        large_value_compression: str = DEFAULT_COMPRESSION,
    ) -> None:
        """`where` names the task's changelog partition in log lines; `values_of(key)` reads the
        large values of the row stored under `key` (through the layers above)."""
        self.store = store
        self.where = where
        self._values_of = values_of
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
        # Rows in the store (committed), and of each row key changed in the open batch whether
        # the store had it before, so a commit keeps the count exact.
        self.state_keys = 0
        self.last_sweep = Sweep()
        self._stored_before: dict[bytes, bool] = {}

    def decode(self, key: bytes, data: bytes) -> StateRecord:
        """The stored bytes of `key`'s row, decoded (its large values read on demand)."""
        return decode_state(data, self._values_of(key))

    def load(self, key: bytes) -> tuple[StateRecord | None, int]:
        """`key`'s committed state from RocksDB, and its encoded size."""
        data = self.store.get_raw(key)
        return (self.decode(key, data), len(data)) if data is not None else (None, 0)

    # -- the open transaction ----------------------------------------------------------------

    def put(self, key: bytes, before: StateRecord | None, state: StateRecord | None) -> None:
        """`key`'s new state, replacing `before` (its state as the transaction saw it)."""
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
        committed image lacks, and tombstones for those it no longer holds."""
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
                state = with_image(state, LazyImage(stored, self._values_of(key)))
        else:
            kept.update(ref.digest for ref in refs_of(image))
        for ref in old_refs:
            if ref.digest not in kept:
                values[store_key(key, ref.digest)] = None
        self._encoded[key] = (state, fresh)
        return (encode_state(state) if state is not None else None), values

    def committed(
        self, encoded: Mapping[bytes, bytes | None], changelog_offset: int
    ) -> tuple[Cacheable, list[bytes]]:
        """The transaction holding `encoded` (from `changes()`, with the task's meta records)
        committed: write it to RocksDB and start a new transaction. Returns what the layer above
        may cache (the states as stored, the new large values) and the keys it must forget."""
        self.store.apply(encoded, changelog_offset)
        for key, existed in self._stored_before.items():
            self.state_keys += (encoded.get(key) is not None) - existed
        self._stored_before.clear()
        cacheable: Cacheable = []
        for key, (state, fresh) in self._encoded.items():
            data = encoded.get(key)
            cacheable.append((key, state, len(data) if data is not None else 0))
            for digest, value, size in fresh:
                cacheable.append((store_key(key, digest), value, size))
        gone = [key for key, data in encoded.items() if data is None and is_store_key(key)]
        self.dirty.clear()
        self._held.clear()
        self.held_bytes = 0
        self._committed_images.clear()
        self._encoded.clear()
        self._raw_repairs.clear()
        return cacheable, gone

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
                self.rewrite(key, self.load(key)[0])

    def rewrite(self, key: bytes, state: StateRecord | None) -> None:
        """Write `key` again in the next transaction, as `state`."""
        if key not in self.dirty:
            committed = self.load(key)[0]
            self._committed_images[key] = committed.image if committed is not None else None
            self._stored_before[key] = committed is not None
        self.dirty[key] = state

    def _hold(self, key: bytes, state: StateRecord | None) -> None:
        """Count `key`'s new state in `held_bytes`: the values its image holds beyond the key's
        committed image (state.large.added_bytes: an unchanged TOAST value filled from state is
        the cached object itself, and counting it again made a hot key set pass the engine's cap
        and force a commit a second), plus what waits in it: parked records and the old images
        of handoffs."""
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
        state = self.dirty.get(key) or self.load(key)[0]
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
        self.rewrite(key, with_image(state, LazyImage(cells, self._values_of(key)), unknown))


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
