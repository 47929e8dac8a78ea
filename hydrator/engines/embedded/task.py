"""A task: the processor for partition `p` of every input (and of the handoff topic).

It routes each record, loads its key's state from the task store, runs the pure core and sends
what comes out to a `Sink`; it keeps the indexes derived from the states (timers, parked keys).
What the state is made of (the open transaction's writes, the caches, large values out of line,
the changelog's encoding) is the task store's (state/embedded/).

The core is given the task's processing-clock time (clock.py): timeouts count only the time the
engine runs, and fire only once the task has caught up with what was waiting when it was assigned.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hydrator.core.hydrator import Hydrator, rejected
from hydrator.core.records import (
    HEADER_ERROR,
    HEADER_SOURCE,
    DeadLetter,
    OutputRecord,
    Transition,
)
from hydrator.core.reselected import Reselected
from hydrator.engines.embedded.clock import (
    CLOCK_KEY,
    CatchUp,
    ProcessingClock,
    decode_reading,
    encode_reading,
)
from hydrator.engines.embedded.counts import UNATTRIBUTED, RunCounts
from hydrator.engines.embedded.local_handoffs import LocalHandoffs
from hydrator.engines.embedded.route_cache import RouteCache
from hydrator.engines.embedded.timers import DeadlineIndex
from hydrator.events import RawRecord, Read
from hydrator.kafka.record_limits import record_bytes
from hydrator.topology.emit import Sink, emit, leaving
from hydrator.topology.layout import Topology
from state.embedded.cache import DEFAULT_CACHE_BYTES
from state.embedded.store import TaskStore
from state.handoff import Handoff
from state.large import DEFAULT_COMPRESSION, DEFAULT_THRESHOLD
from state.layout import split_state_key, topic_of
from state.record import StateRecord, state_key
from state.stores.rocksdb import RocksDBStore

__all__ = ["DEFAULT_CACHE_BYTES", "Sink", "Task"]

log = logging.getLogger(__name__)

# Room for the header a changelog record carries (the input offsets its transaction commits).
CHANGELOG_HEADER_BYTES = 4096
# While timers are pending, the clock reading is saved at least this often even when no state
# changes, so a crash loses at most this much of a timeout's elapsed time (it then fires late by
# as much, never early).
CLOCK_CHECKPOINT_MS = 5_000


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
        rebuilt: bool = False,
    ) -> None:
        """`local_handoffs`: the queue this task shares with the other tasks of its process
        (local_handoffs.py); without one, only handoffs to this task's own partition stay local.
        `rebuilt`: the store was just restored from the changelog alone (see `rebuild_indexes`).
        Raises StoreInconsistent for a store that disagrees with itself."""
        self.partition = partition
        self.states = TaskStore(
            store,
            f"{topology.changelog_topic}-{partition}",
            cache_bytes,
            large_value_threshold,
            large_value_compression,
        )
        # Bytes of the outputs written since the last commit (the loop resets it): with the
        # consumed input, what sizes a consume batch.
        self.written_bytes = 0
        self._routes = RouteCache()
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
        try:
            self.rebuild_indexes(rebuilt)
        except BaseException:
            store.close()  # the caller has no task to close, and moves the store aside
            raise

    # -- inputs ------------------------------------------------------------------------------

    def process(self, record: RawRecord, now_ms: int, reselected: Reselected | None = None) -> None:
        """`reselected`: values read from the source for its placeholders (reselect_step.py)."""
        read = Read(record)  # routing and hydration share it: the value is parsed once
        route = self._route(read)
        if isinstance(route, DeadLetter):
            self._emit(record.topic, rejected(route))
        elif route is None:  # a record without identity is hydrated statelessly
            self._emit(record.topic, self._hydrator.process(None, read, None, now_ms))
        else:
            key = state_key(record.topic, route)
            state = self.state(key)
            step = self._hydrator.process(state, read, route, now_ms, reselected)
            self._apply(record.topic, key, state, step)
        self._local_handoffs.drain()

    def receive_handoff(
        self, handoff: Handoff, now_ms: int, reselected: Mapping[str, Reselected] | None = None
    ) -> None:
        """A handoff read from the handoff topic; `reselected`: values read from the source for
        the records it releases (reselect_step.py)."""
        self.apply_handoff(handoff, now_ms, reselected)
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
            topic = topic_of(key).decode()
            self._apply(topic, key, state, self._hydrator.tick(state, now_ms))
        self._local_handoffs.drain()

    # -- state -------------------------------------------------------------------------------

    def now_ms(self) -> int:
        """The task's processing-clock time, to give the core."""
        return self.clock.now_ms()

    def state(self, key: bytes) -> StateRecord | None:
        return self.states.state(key)

    @property
    def store(self) -> RocksDBStore:
        return self.states.store

    @property
    def dirty(self) -> dict[bytes, StateRecord | None]:
        """The open transaction's changed states."""
        return self.states.dirty

    @property
    def held_bytes(self) -> int:
        return self.states.held_bytes

    @property
    def state_keys(self) -> int:
        return self.states.state_keys

    @property
    def _cache(self) -> dict[bytes, tuple[object, int]]:
        return self.states.cache.entries()

    @property
    def cache_used(self) -> int:
        """Bytes the decoded-state cache counts now."""
        return self.states.cache_used

    @property
    def cache_bytes(self) -> int:
        return self.states.cache_bytes

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    @property
    def state_bytes(self) -> int:
        """RocksDB's estimate of the bytes the store holds (rows, large values, meta records)."""
        return self.states.state_bytes

    def has_changes(self, checkpoint_clock: bool = False) -> bool:
        """Something for the next transaction: changed state, or a clock reading to save
        (timers are pending and the saved one is old, or `checkpoint_clock`: the task stops
        here or moves to another instance)."""
        if self.states.has_changes():
            return True
        if not len(self._deadlines):
            return False
        saved = self._clock_saved_ms
        if checkpoint_clock:
            return saved != self.clock.now_ms()
        return saved is None or self.clock.now_ms() - saved >= CLOCK_CHECKPOINT_MS

    def changes(self) -> dict[bytes, bytes | None]:
        """The changelog records of the next transaction: the task store's, and the clock
        reading that dates them (read after them, so no state is newer)."""
        limit = self._topology.limits.changelog
        overhead = record_bytes(b"", b"", None)
        room = limit - CHANGELOG_HEADER_BYTES - overhead

        def drop(key: bytes, state: StateRecord | None, largest: int) -> None:
            self._drop_oversize_state(key, state, overhead + largest, limit)

        encoded = self.states.changes(room, drop)
        encoded[CLOCK_KEY] = encode_reading(self.clock.now_ms())
        return encoded

    def _drop_oversize_state(
        self, key: bytes, state: StateRecord | None, size: int, limit: int
    ) -> None:
        """A state too large for the changelog would fail every commit: the key is forgotten
        instead, and its records parked on it go to the DLQ with the reason (the row image itself
        is no input, so a dead letter without a value says what was lost)."""
        topic, canonical = split_state_key(key)
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
        self._index(key, None)

    def committed(self, encoded: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """The transaction holding `encoded` (this task's `changes()`) committed."""
        self.states.committed(encoded, changelog_offset)
        reading = decode_reading(encoded.get(CLOCK_KEY))
        if reading is not None:
            self._clock_saved_ms = reading

    def repair(self, keys: list[bytes]) -> None:
        """Write these keys' committed states again in the next transaction: the changelog
        holds a dead transaction's records of them (see changelog.py). A dead transaction's
        clock reading needs no repair: every transaction writes a new one."""
        self.states.repair(keys)

    def rebuild_indexes(self, rebuilt: bool = False) -> None:
        """Timers and parked keys are derived from the store: rebuilt after a restore. The task
        store checks its large values against the rows on the way: a store that disagrees with
        itself raises StoreInconsistent (it is rebuilt from the changelog), unless it was just
        `rebuilt` from the changelog: then what the changelog lacks is forgotten
        (state/embedded/changelog.py)."""
        self._deadlines.clear()
        self._parked.clear()
        for key, state in self.states.sweep(rebuilt):
            self._index(key, state)
        found = self.states.last_sweep
        self._counts.totals["large_values_collected_at_open"] += found.collected
        self._counts.totals["large_values_missing"] += found.missing

    def close(self) -> None:
        self.states.close()

    # -- internals ---------------------------------------------------------------------------

    def _route(self, read: Read) -> str | DeadLetter | None:
        """`Hydrator.route`, remembered per raw key when the codec's key is the Kafka key's:
        CDC traffic keeps coming back to the same rows, and re-canonicalising their key JSON
        every time is measurable."""
        raw_key = read.record.key
        if raw_key is None or not self._hydrator.codec.key_in_record_key:
            return self._hydrator.route(read)
        known = self._routes.get(raw_key)
        if known is not None:
            return known
        route = self._hydrator.route(read)
        if isinstance(route, str):
            self._routes.remember(raw_key, route)
        return route

    def apply_handoff(
        self, handoff: Handoff, now_ms: int, reselected: Mapping[str, Reselected] | None = None
    ) -> None:
        """Apply a handoff to its new key's state, without draining the local queue (its caller
        does)."""
        key = state_key(handoff.topic, handoff.new_key)
        state = self.state(key)
        step = self._hydrator.receive_handoff(state, handoff, now_ms, reselected)
        self._apply(handoff.topic, key, state, step)

    def _apply(self, topic: str, key: bytes, before: StateRecord | None, step: Transition) -> None:
        # The core hands back the very same object when nothing changed: no changelog write.
        if step.state is not before:
            self.states.put(key, before, step.state)
            self._index(key, step.state)
        self._emit(topic, step)

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

    def resize_cache(self, cache_bytes: int) -> None:
        """A new share of the process's cache budget (the number of tasks changed)."""
        self.states.resize_cache(cache_bytes)

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
