"""A task: the processor for partition `p` of every input (and of the handoff topic).

It feeds records to the pure core with the key's state and sends what comes out to a `Sink`.
State changes stay in `dirty` until the batch's transaction commits; only then do they reach the
local store, so the store never holds state whose outputs might still be aborted. Committed
states also stay decoded in a cache capped by bytes: CDC traffic keeps coming back to the same
rows, but rows can be large.

Column values over the large-value threshold are kept out of line (state/large.py): each under
its own store and changelog key (`state.large.store_key`: the row's key and the value's digest),
the row holding only the digest. At commit, a row's new image is compared with its committed one
by digest: a new value is written once, an unchanged one not at all (neither to the store nor to
the changelog), and a value the new image no longer holds gets a tombstone in the same
transaction and write batch as the row, so the store and the compacted changelog never keep a
value no row refers to, whatever crashes. Values are read only when a rule asks for one (a fill,
a whole `before`), through the same byte-capped cache as the rows.

The core is given the task's processing-clock time (clock.py): timeouts count only the time the
engine runs, and fire only once the task has caught up with what was waiting when it was assigned.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hydrator.core.hydrator import Hydrator, rejected
from hydrator.core.records import (
    HEADER_ERROR,
    HEADER_SOURCE,
    DeadLetter,
    OutputRecord,
    Transition,
)
from hydrator.engines.embedded.clock import (
    CLOCK_KEY,
    CatchUp,
    ProcessingClock,
    decode_reading,
    encode_reading,
)
from hydrator.engines.embedded.counts import UNATTRIBUTED, RunCounts
from hydrator.engines.embedded.local_handoffs import LocalHandoffs
from hydrator.engines.embedded.timers import DeadlineIndex
from hydrator.events import RawRecord
from hydrator.kafka.record_limits import record_bytes
from hydrator.topology.emit import Sink, emit, leaving
from hydrator.topology.layout import Topology
from state.codec import decode_state, encode_state
from state.handoff import Handoff
from state.large import (
    DEFAULT_COMPRESSION,
    DEFAULT_THRESHOLD,
    NOT_AT_HAND,
    STORE_PREFIX,
    LargeValue,
    LargeValueError,
    LazyImage,
    image_bytes,
    is_store_key,
    large_cells,
    refs_of,
    split_store_key,
    store_key,
    unpack_value,
)
from state.record import StateRecord, state_key
from state.stores.rocksdb import RocksDBStore

log = logging.getLogger(__name__)

# Room for the header a changelog record carries (the input offsets its transaction commits).
CHANGELOG_HEADER_BYTES = 4096
# The decoded-state cache of a task is capped by bytes: an entry counts its key, its encoded
# state (a decoded row takes about as much: its values are the same strings) and this overhead
# for the objects around them. The least recently used go first.
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
CACHE_ENTRY_OVERHEAD = 256
# Canonical keys remembered per task (a pure function of the key bytes), capped by bytes too;
# keys longer than ROUTE_KEY_MAX are not remembered (they are rare, and would crowd out the rest).
ROUTE_CACHE_BYTES = 4 * 1024 * 1024
ROUTE_KEY_MAX = 1024
ROUTE_ENTRY_OVERHEAD = 160
# While timers are pending, the clock reading is saved at least this often even when no state
# changes, so a crash loses at most this much of a timeout's elapsed time (it then fires late by
# as much, never early).
CLOCK_CHECKPOINT_MS = 5_000
_META_PREFIX = b"\x00"


class Task:
    def __init__(
        self,
        partition: int,
        hydrator: Hydrator,
        store: RocksDBStore,
        topology: Topology,
        sink: Sink,
        counts: RunCounts,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        large_value_threshold: int | None = DEFAULT_THRESHOLD,
        large_value_compression: str = DEFAULT_COMPRESSION,
        local_handoffs: LocalHandoffs | None = None,
    ) -> None:
        """`local_handoffs`: the queue this task shares with the other tasks of its process
        (local_handoffs.py); without one, only handoffs to this task's own partition stay local."""
        self.partition = partition
        self.store = store
        self.dirty: dict[bytes, StateRecord | None] = {}
        # Per key in `dirty`: the image the store holds (its large values are what a commit
        # compares the new image with); and what `changes()` encoded, until it commits.
        self._committed_images: dict[bytes, Any] = {}
        self._encoded: dict[bytes, tuple[StateRecord | None, list[tuple[bytes, Any, int]]]] = {}
        # Large values a dead transaction wrote or collected: their stored bytes, written again.
        self._raw_repairs: dict[bytes, bytes | None] = {}
        self.large_value_threshold = large_value_threshold
        self.large_value_compression = large_value_compression
        # Bytes of the outputs written since the last commit (the loop resets it): with the
        # consumed input, what sizes a consume batch.
        self.written_bytes = 0
        # What the open transaction keeps in memory until it commits: the changed states (one
        # per key, however often it changed), each sized by its image's values.
        self.held_bytes = 0
        self._held: dict[bytes, int] = {}
        # store key -> (decoded state or large value, bytes it counts for)
        self._cache: dict[bytes, tuple[Any, int]] = {}
        self._cache_used = 0
        self.cache_bytes = cache_bytes
        self._routes: dict[bytes, str] = {}
        self._routes_used = 0
        # The reading saved last, from which the clock resumes.
        self._clock_saved_ms = decode_reading(store.get_raw(CLOCK_KEY))
        self.clock = ProcessingClock(self._clock_saved_ms)
        # Timers wait for it; the assignment sets it when the task is assigned.
        self.catch_up = CatchUp.none()
        self._hydrator = hydrator
        self._topology = topology
        self._sink = sink
        self._counts = counts
        self._deadlines = DeadlineIndex()
        self._parked: set[bytes] = set()
        self._local_handoffs = local_handoffs or LocalHandoffs({partition: self})
        # Rows in the store (committed), and of each row key changed in the open batch whether
        # the store had it before, so a commit keeps the count exact.
        self.state_keys = 0
        self._stored_before: dict[bytes, bool] = {}
        self.rebuild_indexes()

    # -- inputs ------------------------------------------------------------------------------

    def process(self, record: RawRecord, now_ms: int) -> None:
        route = self._route(record)
        if isinstance(route, DeadLetter):
            self._emit(record.topic, rejected(route))
        elif route is None:  # a record without identity is hydrated statelessly
            self._emit(record.topic, self._hydrator.process(None, record, None, now_ms))
        else:
            key = state_key(record.topic, route)
            state = self.state(key)
            step = self._hydrator.process(state, record, route, now_ms)
            self._apply(record.topic, key, state, step)
        self._local_handoffs.drain()

    def receive_handoff(self, handoff: Handoff, now_ms: int) -> None:
        """A handoff read from the handoff topic."""
        self.apply_handoff(handoff, now_ms)
        self._local_handoffs.drain()

    def dead_letter(self, dead: DeadLetter) -> None:
        """A record the engine itself cannot read (a corrupt handoff)."""
        self._sink.dead(leaving(dead.to_output()))
        self._counts.batch(UNATTRIBUTED)["dead_letters"] += 1

    def fire_timers(self, now_ms: int) -> None:
        for key in self._deadlines.pop_due(now_ms):
            state = self.state(key)
            if state is None:
                continue
            topic = key.split(b"\x00", 1)[0].decode()
            self._apply(topic, key, state, self._hydrator.tick(state, now_ms))
        self._local_handoffs.drain()

    # -- state -------------------------------------------------------------------------------

    def now_ms(self) -> int:
        """The task's processing-clock time, to give the core."""
        return self.clock.now_ms()

    def state(self, key: bytes) -> StateRecord | None:
        if key in self.dirty:
            return self.dirty[key]
        cached = self._cache.get(key)
        if cached is not None:
            return cached[0]
        data = self.store.get_raw(key)
        state = self._decode(key, data) if data is not None else None
        self._remember(key, state, len(data) if data is not None else 0)
        return state

    def _decode(self, key: bytes, data: bytes) -> StateRecord:
        return decode_state(data, _StoredValues(self, key))

    @property
    def cache_used(self) -> int:
        """Bytes the decoded-state cache counts now."""
        return self._cache_used

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    @property
    def state_bytes(self) -> int:
        """RocksDB's estimate of the bytes the store holds (rows, large values, meta records)."""
        return self.store.estimated_bytes()

    def has_changes(self, checkpoint_clock: bool = False) -> bool:
        """Something for the next transaction: changed state, or a clock reading to save
        (timers are pending and the saved one is old, or `checkpoint_clock`: the task stops
        here or moves to another instance)."""
        if self.dirty or self._raw_repairs:
            return True
        if not len(self._deadlines):
            return False
        saved = self._clock_saved_ms
        if checkpoint_clock:
            return saved != self.clock.now_ms()
        return saved is None or self.clock.now_ms() - saved >= CLOCK_CHECKPOINT_MS

    def changes(self) -> dict[bytes, bytes | None]:
        """The changelog records of the next transaction: the changed states, encoded, the large
        values they add and collect, and the clock reading that dates them (read after them, so
        no state is newer)."""
        encoded: dict[bytes, bytes | None] = dict(self._raw_repairs)
        limit = self._topology.limits.changelog
        overhead = record_bytes(b"", b"", None)
        room = limit - CHANGELOG_HEADER_BYTES - overhead
        for key, state in self.dirty.items():
            data, values = self._encode(key, state)
            # the largest record this key writes, as key + value bytes
            largest = len(key) + len(data) if data else 0
            for value_key, value in values.items():
                if value and len(value_key) + len(value) > largest:
                    largest = len(value_key) + len(value)
            if largest > room:
                self._drop_oversize_state(key, overhead + largest, limit)
                data, values = self._encode(key, None)
            encoded[key] = data
            encoded.update(values)
        encoded[CLOCK_KEY] = encode_reading(self.clock.now_ms())
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
                state = _with_image(state, LazyImage(stored, _StoredValues(self, key)))
        else:
            kept.update(ref.digest for ref in refs_of(image))
        for ref in old_refs:
            if ref.digest not in kept:
                values[store_key(key, ref.digest)] = None
        self._encoded[key] = (state, fresh)
        return (encode_state(state) if state is not None else None), values

    def _drop_oversize_state(self, key: bytes, size: int, limit: int) -> None:
        """A state too large for the changelog would fail every commit: the key is forgotten
        instead, and its records parked on it go to the DLQ with the reason (the row image itself
        is no input, so a dead letter without a value says what was lost)."""
        state = self.dirty[key]
        topic, _, canonical = key.decode(errors="replace").partition("\x00")
        reason = (
            f"the state of key {canonical[:200]} is {size} bytes, over the changelog's "
            f"{limit}-byte limit: the key is forgotten, and its next events are hydrated as "
            "those of a new key"
        )
        headers = ((HEADER_ERROR, reason.encode()), (HEADER_SOURCE, f"{topic}:state".encode()))
        self._sink.dead(OutputRecord(self.partition, canonical.encode(), None, headers))
        for parked in state.parked if state is not None else ():
            self._sink.dead(DeadLetter(parked, reason).to_output())
        counts = self._counts.batch(topic)
        counts["dead_letters"] += 1 + (len(state.parked) if state is not None else 0)
        counts["oversize_states"] += 1
        self.dirty[key] = None
        self._index(key, None)

    def committed(self, encoded: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """The transaction holding `encoded` (this task's `changes()`) committed."""
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
        reading = decode_reading(encoded.get(CLOCK_KEY))
        if reading is not None:
            self._clock_saved_ms = reading

    def repair(self, keys: list[bytes]) -> None:
        """Write these keys' committed states again in the next transaction: the changelog
        holds a dead transaction's records of them (see changelog.py). A dead transaction's
        clock reading needs no repair: every transaction writes a new one."""
        for key in keys:
            if key in self.dirty or key in self._raw_repairs:
                continue  # written already: the check of large values corrected it
            if is_store_key(key):
                self._raw_repairs[key] = self.store.get_raw(key)
            elif not key.startswith(_META_PREFIX):
                data = self.store.get_raw(key)
                self._rewrite(key, self._decode(key, data) if data is not None else None)

    def rebuild_indexes(self) -> None:
        """Timers and parked keys are derived from the store: rebuilt after a restore. The
        large values are checked against the rows on the way (a sweep: every reference has its
        value, and every value a reference), so that damage found by the restore or a bug never
        lasts past a restart."""
        self._deadlines.clear()
        self._parked.clear()
        self.state_keys = 0
        referenced: dict[bytes, tuple[bytes, StateRecord]] = {}
        for key, state in self.store.items():
            self._index(key, state)
            self.state_keys += 1
            for ref in refs_of(state.image):
                referenced[store_key(key, ref.digest)] = (key, state)
        for value_key in self.store.keys_with_prefix(STORE_PREFIX):
            if referenced.pop(value_key, None) is None:
                log.warning("%s: collecting a large value no row refers to", self._where())
                self._raw_repairs[value_key] = None
                self._counts.totals["large_values_collected_at_open"] += 1
        for value_key, (key, state) in referenced.items():
            _, digest = split_store_key(value_key)
            state = self.dirty.get(key, state)
            assert state is not None and type(state.image) is LazyImage
            cells = {
                column: cell
                for column, cell in state.image.cells.items()
                if not (type(cell) is LargeValue and cell.digest == digest)
            }
            log.warning(
                "%s: a large value of key %s is missing from the store: the row forgets its "
                "column, which the next event must ship (or it stays unresolved)",
                self._where(),
                key.decode(errors="replace").replace("\x00", "/")[:200],
            )
            self._counts.totals["large_values_missing"] += 1
            self._rewrite(key, _with_image(state, LazyImage(cells, _StoredValues(self, key))))

    def _rewrite(self, key: bytes, state: StateRecord | None) -> None:
        """Write `key` again in the next transaction, as `state`."""
        if key not in self.dirty:
            data = self.store.get_raw(key)
            committed = self._decode(key, data) if data is not None else None
            self._committed_images[key] = committed.image if committed is not None else None
            self._stored_before[key] = data is not None
        self.dirty[key] = state

    def _where(self) -> str:
        return f"{self._topology.changelog_topic}-{self.partition}"

    def close(self) -> None:
        self.store.close()

    # -- internals ---------------------------------------------------------------------------

    def _route(self, record: RawRecord) -> str | DeadLetter | None:
        """`Hydrator.route`, remembered per raw key when the codec's key is the Kafka key's:
        CDC traffic keeps coming back to the same rows, and re-canonicalising their key JSON
        every time is measurable."""
        if record.key is None or not self._hydrator.codec.key_in_record_key:
            return self._hydrator.route(record)
        routes = self._routes
        known = routes.get(record.key)
        if known is not None:
            return known
        route = self._hydrator.route(record)
        if isinstance(route, str) and len(record.key) <= ROUTE_KEY_MAX:
            cost = len(record.key) + len(route) + ROUTE_ENTRY_OVERHEAD
            if self._routes_used + cost > ROUTE_CACHE_BYTES:
                routes.clear()
                self._routes_used = 0
            routes[record.key] = route
            self._routes_used += cost
        return route

    def apply_handoff(self, handoff: Handoff, now_ms: int) -> None:
        """Apply a handoff to its new key's state, without draining the local queue (its caller
        does)."""
        key = state_key(handoff.topic, handoff.new_key)
        state = self.state(key)
        step = self._hydrator.receive_handoff(state, handoff, now_ms)
        self._apply(handoff.topic, key, state, step)

    def _apply(self, topic: str, key: bytes, before: StateRecord | None, step: Transition) -> None:
        # The core hands back the very same object when nothing changed: no changelog write.
        if step.state is not before:
            if key not in self.dirty:
                self._committed_images[key] = before.image if before is not None else None
                self._stored_before[key] = before is not None
            self.dirty[key] = step.state
            self._index(key, step.state)
            self._hold(key, step.state)
        self._emit(topic, step)

    def _hold(self, key: bytes, state: StateRecord | None) -> None:
        """Count `key`'s new state in `held_bytes`: its image's values (state.large.image_bytes;
        a value shared with the cache counts too, so this never undercounts), plus what waits in
        it: parked records and the old images of handoffs."""
        if state is None:
            size = 0
        else:
            size = image_bytes(state.image)
            if state.parked or state.handoffs:
                size += sum(len(parked.value or b"") for parked in state.parked)
                size += sum(image_bytes(handoff.image) for handoff in state.handoffs)
        self.held_bytes += size - self._held.get(key, 0)
        self._held[key] = size

    def _emit(self, topic: str, step: Transition) -> int:
        """Send `step`'s results on (hydrator/topology/emit.py); returns its outputs' bytes."""
        emitted = emit(step, topic, self._topology, self._sink, self._keep_local)
        self.written_bytes += emitted
        counts = self._counts.batch(topic)
        for name, n in step.counts.items():
            counts[name] += n
        return emitted

    def _keep_local(self, target: int, handoff: Handoff) -> bool:
        """Apply a handoff in this process when one of its tasks owns the new key."""
        if not self._local_handoffs.owns(target):
            return False
        self._local_handoffs.put(target, handoff)
        self._counts.batch(handoff.topic)["handoffs_local"] += 1
        return True

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

    def _index(self, key: bytes, state: StateRecord | None) -> None:
        if state is None:
            self._deadlines.set(key, None)
            self._parked.discard(key)
            return
        self._deadlines.set(key, self._hydrator.next_deadline_ms(state))
        if state.is_parked:
            self._parked.add(key)
        else:
            self._parked.discard(key)


class _StoredValues:
    """Reads the large values of the row stored under `owner`: from the task's cache, else from
    its store (and caches them)."""

    __slots__ = ("_owner", "_task")

    def __init__(self, task: Task, owner: bytes) -> None:
        self._task = task
        self._owner = owner

    def read(self, ref: LargeValue) -> Any:
        key = store_key(self._owner, ref.digest)
        cached = self._task._cache.get(key)
        if cached is not None:
            return cached[0]
        blob = self._task.store.get_raw(key)
        if blob is None:
            raise LargeValueError(
                f"large value {ref.digest.hex()} of this key is missing from the store"
            )
        value = unpack_value(blob)
        self._task._remember(key, value, ref.size)
        return value

    def peek(self, ref: LargeValue) -> Any:
        cached = self._task._cache.get(store_key(self._owner, ref.digest))
        return cached[0] if cached is not None else NOT_AT_HAND


def _with_image(state: StateRecord, image: Any) -> StateRecord:
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
    )
