"""A task: the processor for partition `p` of every input (and of the handoff topic).

It feeds records to the pure core with the key's state and sends what comes out to a `Sink`.
State changes stay in `dirty` until the batch's transaction commits; only then do they reach the
local store, so the store never holds state whose outputs might still be aborted. Committed
states also stay decoded in a cache capped by bytes: CDC traffic keeps coming back to the same
rows, but rows can be large.

The core is given the task's processing-clock time (clock.py): timeouts count only the time the
engine runs, and fire only once the task has caught up with what was waiting when it was assigned.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from typing import Protocol

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
from hydrator.engines.embedded.timers import DeadlineIndex
from hydrator.engines.embedded.topology import Topology
from hydrator.events import RawRecord
from hydrator.kafka.record_limits import record_bytes
from state.codec import decode_state, encode_state
from state.handoff import Handoff
from state.record import StateRecord, state_key
from state.stores.rocksdb import RocksDBStore

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


class Sink(Protocol):
    """Where a task's results go: the open Kafka transaction."""

    def output(self, input_topic: str, record: OutputRecord) -> None: ...

    def dead(self, record: OutputRecord) -> None: ...

    def handoff(self, partition: int, handoff: Handoff) -> None: ...


class Task:
    def __init__(
        self,
        partition: int,
        hydrator: Hydrator,
        store: RocksDBStore,
        topology: Topology,
        sink: Sink,
        counts: Counter[str],
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.partition = partition
        self.store = store
        self.dirty: dict[bytes, StateRecord | None] = {}
        # Bytes of the outputs written since the last commit (the loop resets it): with `dirty`,
        # what the open transaction holds in memory.
        self.written_bytes = 0
        # key -> (decoded state, bytes it counts for)
        self._cache: dict[bytes, tuple[StateRecord | None, int]] = {}
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
        self._local_handoffs: deque[Handoff] = deque()
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
        self._drain_local_handoffs(now_ms)

    def receive_handoff(self, handoff: Handoff, now_ms: int) -> None:
        self._receive_handoff(handoff, now_ms)
        self._drain_local_handoffs(now_ms)

    def dead_letter(self, dead: DeadLetter) -> None:
        """A record the engine itself cannot read (a corrupt handoff)."""
        self._sink.dead(dead.to_output())
        self._counts["dead_letters"] += 1

    def fire_timers(self, now_ms: int) -> None:
        for key in self._deadlines.pop_due(now_ms):
            state = self.state(key)
            if state is None:
                continue
            topic = key.split(b"\x00", 1)[0].decode()
            self._apply(topic, key, state, self._hydrator.tick(state, now_ms))
        self._drain_local_handoffs(now_ms)

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
        state = decode_state(data) if data is not None else None
        self._remember(key, state, len(data) if data is not None else 0)
        return state

    @property
    def cache_used(self) -> int:
        """Bytes the decoded-state cache counts now."""
        return self._cache_used

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def has_changes(self, checkpoint_clock: bool = False) -> bool:
        """Something for the next transaction: changed state, or a clock reading to save
        (timers are pending and the saved one is old, or `checkpoint_clock`: the task stops
        here or moves to another instance)."""
        if self.dirty:
            return True
        if not len(self._deadlines):
            return False
        saved = self._clock_saved_ms
        if checkpoint_clock:
            return saved != self.clock.now_ms()
        return saved is None or self.clock.now_ms() - saved >= CLOCK_CHECKPOINT_MS

    def changes(self) -> dict[bytes, bytes | None]:
        """The changelog records of the next transaction: the changed states, encoded, and the
        clock reading that dates them (read after them, so no state is newer)."""
        encoded = {k: encode_state(s) if s is not None else None for k, s in self.dirty.items()}
        limit = self._topology.limits.changelog
        for key, data in encoded.items():
            if data is not None and record_bytes(key, data, None) + CHANGELOG_HEADER_BYTES > limit:
                encoded[key] = self._drop_oversize_state(key, len(data), limit)
        encoded[CLOCK_KEY] = encode_reading(self.clock.now_ms())
        return encoded

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
        self._counts["dead_letters"] += 1 + (len(state.parked) if state is not None else 0)
        self._counts["oversize_states"] += 1
        self.dirty[key] = None
        self._index(key, None)

    def committed(self, encoded: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """The transaction holding `encoded` (this task's `changes()`) committed."""
        self.store.apply(encoded, changelog_offset)
        for key, state in self.dirty.items():
            data = encoded.get(key)
            self._remember(key, state, len(data) if data is not None else 0)
        self.dirty.clear()
        reading = decode_reading(encoded.get(CLOCK_KEY))
        if reading is not None:
            self._clock_saved_ms = reading

    def repair(self, keys: list[bytes]) -> None:
        """Write these keys' committed states again in the next transaction: the changelog
        holds a dead transaction's records of them (see changelog.py). A dead transaction's
        clock reading needs no repair: every transaction writes a new one."""
        for key in keys:
            if not key.startswith(_META_PREFIX):
                self.dirty[key] = self.store.get(key)

    def rebuild_indexes(self) -> None:
        """Timers and parked keys are derived from the store: rebuilt after a restore."""
        self._deadlines.clear()
        self._parked.clear()
        for key, state in self.store.items():
            self._index(key, state)

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

    def _receive_handoff(self, handoff: Handoff, now_ms: int) -> None:
        key = state_key(handoff.topic, handoff.new_key)
        state = self.state(key)
        step = self._hydrator.receive_handoff(state, handoff, now_ms)
        self._apply(handoff.topic, key, state, step)

    def _apply(self, topic: str, key: bytes, before: StateRecord | None, step: Transition) -> None:
        # The core hands back the very same object when nothing changed: no changelog write.
        if step.state is not before:
            self.dirty[key] = step.state
            self._index(key, step.state)
        self._emit(topic, step)

    def _emit(self, topic: str, step: Transition) -> None:
        for record in step.emitted:
            self._sink.output(topic, record)
            self.written_bytes += len(record.value or b"")
        for dead in step.dead:
            self._sink.dead(dead.to_output())
        for handoff in step.handoffs:
            target = self._topology.handoff_partition(handoff)
            if target == self.partition:
                self._local_handoffs.append(handoff)
                self._counts["handoffs_local"] += 1
            else:
                self._sink.handoff(target, handoff)
        counts = self._counts
        for name, n in step.counts.items():
            counts[name] += n

    def _drain_local_handoffs(self, now_ms: int) -> None:
        # A queue, not recursion: a released record can itself be a key change.
        while self._local_handoffs:
            self._receive_handoff(self._local_handoffs.popleft(), now_ms)

    def _remember(self, key: bytes, state: StateRecord | None, encoded_size: int) -> None:
        cache = self._cache
        previous = cache.pop(key, None)  # re-inserted at the young end
        if previous is not None:
            self._cache_used -= previous[1]
        cost = len(key) + encoded_size + CACHE_ENTRY_OVERHEAD
        if cost > self.cache_bytes // 4:
            return  # one huge row must not push out everything else
        cache[key] = (state, cost)
        self._cache_used += cost
        if self._cache_used > self.cache_bytes:
            self._shrink_cache(self.cache_bytes * 3 // 4)

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
