"""The embedded engine's re-select step (docs/cold-start.md, "Re-select fallback"): before a
consumed batch is processed, find the placeholders in it that nothing will fill, read them from
the source, one query per table, and hand each record what was read for it.

How it finds them without a second way of applying the rules: it runs the batch through the
core on a scratch copy of the state (the core is pure; nothing is sent or stored) and takes the
outputs that come out unresolved. The batch is then processed for real, each such record with
its re-selected values (Hydrator.process's `reselected`), so outputs, headers, counters and the
state come from the one pass of the rules. The scratch pass takes handoffs as the real pass
does (those read from the handoff topic, and those a record sends to a task of this process,
applied at once), so the records a key change's handoff releases are found too: a handoff
without the old image (the old key had none) is a miss like any other, and the real pass hands
the released records their values through `Hydrator.receive_handoff`. Records still parked
when the handoff timeout releases them are not re-selected (they come out unresolved).
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import Message

from hydrator.core.hydrator import Hydrator, read_handoff
from hydrator.core.records import DeadLetter
from hydrator.core.reselected import Reselected, ReselectedRow, reselected_for
from hydrator.events import RawRecord, Read
from hydrator.formats.debezium import NEW_KEY_HEADER
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.kafka.consumed import raw_record
from hydrator.reselect.client import PostgresReselect, Table
from hydrator.reselect.misses import Miss, MissFinder, source_of, tx_id_of
from state.handoff import Handoff
from state.record import StateRecord, state_key

if TYPE_CHECKING:
    from hydrator.config import RunConfig
    from hydrator.engines.embedded.counts import RunCounts
    from hydrator.engines.embedded.dlq_replay import DlqInput
    from hydrator.engines.embedded.task import Task
    from hydrator.topology.layout import Topology

log = logging.getLogger(__name__)


class StateSource(Protocol):
    """What the step reads of a task: a key's state as the open batch has it."""

    def state(self, key: bytes) -> StateRecord | None: ...


# What the step is given per consumed record, in batch order: the task of its partition and the
# input record, or the handoff read from the handoff topic.
BatchItem = tuple[StateSource, RawRecord | Handoff]
# The task of this process that owns a handoff's new key (None: another process applies it).
HandoffOwner = Callable[[Handoff], StateSource | None]


class BatchReselect:
    def __init__(self, hydrator: Hydrator, client: PostgresReselect) -> None:
        self.client = client
        self._finder = MissFinder(hydrator, client.forms)

    def for_consumed(
        self,
        messages: list[Message],
        tasks: Mapping[int, Task],
        topology: Topology,
        counts: RunCounts,
        replay: DlqInput | None = None,
    ) -> Mapping[str, Reselected]:
        """`prepare` for a consumed batch, each record with the task of its partition (a dead
        letter of a replay: the record it holds); the queries it cost go to the batch's
        counts."""
        if not messages:
            return {}
        batch: list[BatchItem] = []
        now_ms: int | None = None
        for msg in messages:
            if msg.error() is not None:
                continue
            record = raw_record(msg)
            if replay is not None:
                unwrapped = replay.peek(record)
                if unwrapped is None:
                    continue
                record = unwrapped
            task = tasks.get(record.partition)
            if task is None:
                continue
            if now_ms is None:
                now_ms = task.now_ms()
            if record.topic != topology.handoff_topic:
                batch.append((task, record))
                continue
            handoff = read_handoff(record)
            if not isinstance(handoff, DeadLetter):
                batch.append((task, handoff))
        if not batch or now_ms is None:
            return {}

        def owner(handoff: Handoff) -> StateSource | None:
            return tasks.get(topology.handoff_partition(handoff))

        stats = self.client.stats
        before = (stats.queries, stats.failures, stats.skipped)
        found = self.prepare(batch, owner, now_ms)
        batch_counts = counts.batch()
        batch_counts["reselect_queries"] += stats.queries - before[0]
        batch_counts["reselect_failures"] += stats.failures - before[1]
        batch_counts["reselect_skipped"] += stats.skipped - before[2]
        return found

    def prepare(
        self, batch: Iterable[BatchItem], owner: HandoffOwner, now_ms: int
    ) -> dict[str, Reselected]:
        """Re-selected values for the batch's records (by `RawRecord.source`) whose `after` has
        placeholders nothing else fills, also those a handoff releases (records parked behind a
        key change, in this batch or before); empty when there are none or the source cannot
        answer."""
        scratch = _Scratch(self._finder, owner, now_ms)
        scratch.run(list(batch))
        misses = scratch.misses
        if not misses:
            return {}
        rewritten = scratch.rewritten()
        found: dict[str, Reselected] = {}
        for (schema, table, key_columns), group in _by_table(misses).items():
            shipped: dict[str, Any] = {}
            for miss in group:
                shipped.update(miss.shipped)
            rows = self.client.fetch(
                Table(schema, table), key_columns, (m.key for m in group), shipped
            )
            if rows is None:
                continue
            for miss in group:
                row: ReselectedRow | None = rows.get(miss.key)
                chosen = reselected_for(
                    row, tuple(miss.shipped), miss.tx_id, miss.source in rewritten
                )
                if chosen is not None:
                    found[miss.source] = chosen
        return found


class _Scratch:
    """The batch through the core on a scratch copy of the state, as the real pass will take
    it: each input record through `Hydrator.process`, each handoff (read from the handoff topic,
    or sent by a record to a task of this process, which the real pass applies at once) through
    `receive_handoff`, so a key change's CREATE and what is parked behind it are found whether
    their handoff comes before or after them. Only the keys of records that may hold a
    placeholder (its spellings are looked for in the bytes), key changes and handoffs go
    through it, so a batch without any costs a substring search a record."""

    def __init__(self, finder: MissFinder, owner: HandoffOwner, now_ms: int) -> None:
        self.finder = finder
        self.owner = owner
        self.now_ms = now_ms
        self.states: dict[bytes, StateRecord | None] = {}
        self.misses: list[Miss] = []
        # (state key, record source) in the order the real pass applies the records, and the
        # records by source: which misses a later change of their row in the same transaction
        # follows (`rewritten`)
        self.order: list[tuple[bytes, str]] = []
        self.records: dict[str, RawRecord] = {}
        self._queue: deque[tuple[StateSource, Handoff]] = deque()

    def run(self, batch: list[BatchItem]) -> None:
        finder = self.finder
        routed: list[tuple[str, StateSource, Read | Handoff]] = []
        candidates: set[str] = set()  # keys with a record that may hold a placeholder
        for task, item in batch:
            if isinstance(item, Handoff):
                routed.append(("", task, item))
                continue
            read = Read(item)  # the scratch pass's own: it renders into what it decoded
            route = finder.scratch.route(read)
            if isinstance(route, str):
                routed.append((route, task, read))
                if finder.may_miss(item):
                    candidates.add(route)
        for route, task, entry in routed:
            if isinstance(entry, Handoff):
                self._queue.append((task, entry))
            elif route in candidates or entry.record.header(NEW_KEY_HEADER) is not None:
                self._input(task, entry, route)
            self._drain()

    def _input(self, task: StateSource, read: Read, route: str) -> None:
        record = read.record
        key = state_key(record.topic, route)
        step, miss = self.finder.find(self._state(task, key), read, route, self.now_ms)
        self.states[key] = step.state
        if not step.counts.get("parked"):  # a parked record is applied when it is released
            self._applied(key, record)
        if miss is not None:
            self.misses.append(miss)
        self._send(step.handoffs)

    def _drain(self) -> None:
        """Apply the queued handoffs in order (a released record can send another)."""
        queue = self._queue
        while queue:
            task, handoff = queue.popleft()
            key = state_key(handoff.topic, handoff.new_key)
            state = self._state(task, key)
            step, misses = self.finder.find_released(state, handoff, self.now_ms)
            self.states[key] = step.state
            parked = state.parked if state is not None else ()
            released = {source_of(out.headers) for out in step.emitted}
            for record in parked:
                if record.source in released:
                    self._applied(key, record)
            self.misses += misses
            self._send(step.handoffs)

    def _send(self, handoffs: tuple[Handoff, ...]) -> None:
        for handoff in handoffs:
            task = self.owner(handoff)
            if task is not None:  # another process's: it finds its own misses
                self._queue.append((task, handoff))

    def _applied(self, key: bytes, record: RawRecord) -> None:
        self.order.append((key, record.source))
        self.records[record.source] = record

    def _state(self, task: StateSource, key: bytes) -> StateRecord | None:
        return self.states[key] if key in self.states else task.state(key)

    def rewritten(self) -> set[str]:
        """The misses whose row has a later change in the batch from the same transaction: a
        row updated twice in one transaction carries that transaction's xmin after both, so the
        row read cannot prove its value at the first."""
        records = self.records
        wanted = {
            (state_key(records[m.source].topic, m.state_key), m.source): m for m in self.misses
        }
        keys = {key for key, _ in wanted}
        seen_after: dict[bytes, set[int | None]] = defaultdict(set)  # key -> later txIds
        rewritten: set[str] = set()
        for key, source in reversed(self.order):
            if key not in keys:
                continue
            miss = wanted.get((key, source))
            if miss is not None and miss.tx_id is not None and miss.tx_id in seen_after[key]:
                rewritten.add(miss.source)
            seen_after[key].add(miss.tx_id if miss is not None else tx_id_of(records[source]))
        return rewritten


def _by_table(misses: list[Miss]) -> Mapping[tuple[str, str, tuple[str, ...]], list[Miss]]:
    groups: dict[tuple[str, str, tuple[str, ...]], list[Miss]] = defaultdict(list)
    for miss in misses:
        groups[(miss.schema, miss.table, miss.key_columns)].append(miss)
    return groups


def batch_reselect(hydrator: Hydrator, config: RunConfig) -> BatchReselect | None:
    """The run's re-select step (None without `--reselect`)."""
    if config.reselect is None:
        return None
    forms = PlaceholderForms(config.format_options.placeholder_bytes)
    return BatchReselect(hydrator, PostgresReselect(config.reselect, forms))
