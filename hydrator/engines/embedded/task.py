"""A task: the processor for partition `p` of every input (and of the handoff topic).

It feeds records to the pure core with the key's state and sends what comes out to a `Sink`.
State changes stay in `dirty` until the batch's transaction commits; only then do they reach the
local store, so the store never holds state whose outputs might still be aborted. Committed
states also stay decoded in a small cache: CDC traffic keeps coming back to the same rows.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from itertools import islice
from typing import Protocol

from hydrator.core.hydrator import Hydrator
from hydrator.core.records import DeadLetter, Handoff, OutputRecord, RawRecord, Transition
from hydrator.engines.embedded.timers import DeadlineIndex
from hydrator.engines.embedded.topology import Topology
from state.record import StateRecord, state_key
from state.stores.rocksdb import RocksDBStore

# Decoded committed states kept per task; the least recently written go first.
CACHE_ENTRIES = 20_000
# Canonical keys remembered per task (a pure function of the key bytes).
ROUTE_ENTRIES = 50_000
_ABSENT = object()


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
    ) -> None:
        self.partition = partition
        self.store = store
        self.dirty: dict[bytes, StateRecord | None] = {}
        self._cache: dict[bytes, object] = {}
        self._routes: dict[bytes, str] = {}
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
        if route is None or isinstance(route, DeadLetter):
            # Keyless records are hydrated statelessly; bad keys become dead letters. Neither
            # has a state to keep.
            self._emit(record.topic, self._hydrator.process(None, record, now_ms))
        else:
            key = state_key(record.topic, route)
            state = self.state(key)
            self._apply(record.topic, key, state, self._hydrator.process(state, record, now_ms))
        self._drain_local_handoffs(now_ms)

    def receive_handoff(self, handoff: Handoff, now_ms: int) -> None:
        self._receive_handoff(handoff, now_ms)
        self._drain_local_handoffs(now_ms)

    def dead_letter(self, record: RawRecord, reason: str) -> None:
        """A record the engine itself cannot read (a corrupt handoff)."""
        self._sink.dead(DeadLetter(record, reason).to_output())
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

    def state(self, key: bytes) -> StateRecord | None:
        if key in self.dirty:
            return self.dirty[key]
        cached = self._cache.get(key, _ABSENT)
        if cached is not _ABSENT:
            return cached  # type: ignore[return-value]
        state = self.store.get(key)
        self._remember(key, state)
        return state

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def committed(self, encoded: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """The transaction holding `encoded` (this task's dirty state) committed."""
        self.store.apply(encoded, changelog_offset)
        for key, state in self.dirty.items():
            self._remember(key, state)
        self.dirty.clear()

    def repair(self, keys: list[bytes]) -> None:
        """Write these keys' committed states again in the next transaction: the changelog
        holds a dead transaction's records of them (see changelog.py)."""
        for key in keys:
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
        """`Hydrator.route`, remembered per raw key: CDC traffic keeps coming back to the same
        rows, and re-canonicalising their key JSON every time is measurable."""
        routes = self._routes
        if record.key is not None:
            known = routes.get(record.key)
            if known is not None:
                return known
        route = self._hydrator.route(record)
        if isinstance(route, str):
            if len(routes) >= ROUTE_ENTRIES:
                routes.clear()
            routes[record.key] = route  # type: ignore[index]
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

    def _remember(self, key: bytes, state: StateRecord | None) -> None:
        cache = self._cache
        cache.pop(key, None)  # re-inserted at the young end
        cache[key] = state
        if len(cache) > CACHE_ENTRIES:
            for old in list(islice(cache, len(cache) // 4)):
                del cache[old]

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
