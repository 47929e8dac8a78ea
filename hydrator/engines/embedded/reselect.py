"""The embedded engine's re-select step (docs/cold-start.md, "Re-select fallback"): before a
consumed batch is processed, find the placeholders in it that nothing will fill, read them from
the source, one query per table, and hand each record what was read for it.

How it finds them without a second way of applying the rules: it runs the batch through the
core on a scratch copy of the state (the core is pure; nothing is sent or stored) and takes the
outputs that come out unresolved. The batch is then processed for real, each such record with
its re-selected values (Hydrator.process's `reselected`), so outputs, headers, counters and the
state come from the one pass of the rules. Records held back behind a key change are not
re-selected (their key change's old image fills them, or the handoff timeout releases them
unresolved).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from hydrator.core.hydrator import Hydrator
from hydrator.core.reselect import Reselected, ReselectedRow, reselected_for
from hydrator.events import RawRecord, Read
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.postgres.misses import Miss, MissFinder, tx_id_of
from hydrator.postgres.reselect import PostgresReselect, Table
from state.record import StateRecord, state_key

if TYPE_CHECKING:
    from hydrator.config import RunConfig

log = logging.getLogger(__name__)


class StateSource(Protocol):
    """What the step reads of a task: a key's state as the open batch has it."""

    def state(self, key: bytes) -> StateRecord | None: ...


class BatchReselect:
    def __init__(self, hydrator: Hydrator, client: PostgresReselect) -> None:
        self.client = client
        self._finder = MissFinder(hydrator, client.forms)

    def prepare(
        self, records: Iterable[tuple[StateSource, RawRecord]], now_ms: int
    ) -> dict[str, Reselected]:
        """Re-selected values for the batch's records (by `RawRecord.source`) whose `after` has
        placeholders nothing else fills; empty when there are none or the source cannot answer."""
        batch = list(records)
        misses, routed = self._misses(batch, now_ms)
        if not misses:
            return {}
        rewritten = _rewritten_in_batch(routed, misses)
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

    def _misses(
        self, batch: list[tuple[StateSource, RawRecord]], now_ms: int
    ) -> tuple[list[Miss], list[tuple[str, RawRecord]]]:
        """The batch's misses, and the records of their keys with the keys. Only the keys of
        records that may hold a placeholder (its spellings are looked for in the bytes) go
        through the scratch pass, so a batch without any costs a substring search a record."""
        scratch: dict[bytes, StateRecord | None] = {}
        misses: list[Miss] = []
        routed: list[tuple[str, StateSource, Read]] = []
        finder = self._finder
        candidates: set[str] = set()  # keys with a record that may hold a placeholder
        for task, record in batch:
            read = Read(record)  # the scratch pass's own: it renders into what it decoded
            route = finder.scratch.route(read)
            if isinstance(route, str):
                routed.append((route, task, read))
                if finder.may_miss(record):
                    candidates.add(route)
        for route, task, read in routed:
            if route not in candidates:
                continue
            key = state_key(read.record.topic, route)
            state = scratch[key] if key in scratch else task.state(key)
            step, miss = finder.find(state, read, route, now_ms)
            scratch[key] = step.state
            if miss is not None:
                misses.append(miss)
        return misses, [(route, read.record) for route, _, read in routed if route in candidates]


def _by_table(misses: list[Miss]) -> Mapping[tuple[str, str, tuple[str, ...]], list[Miss]]:
    groups: dict[tuple[str, str, tuple[str, ...]], list[Miss]] = defaultdict(list)
    for miss in misses:
        groups[(miss.schema, miss.table, miss.key_columns)].append(miss)
    return groups


def _rewritten_in_batch(routed: list[tuple[str, RawRecord]], misses: list[Miss]) -> set[str]:
    """The misses whose key has a later record in the batch from the same transaction: a row
    updated twice in one transaction carries that transaction's xmin after both, so the row
    read cannot prove its value at the first."""
    wanted = {(m.state_key, m.source): m for m in misses}
    keys = {m.state_key for m in misses}
    seen_after: dict[str, set[int | None]] = defaultdict(set)  # key -> later records' txIds
    rewritten: set[str] = set()
    for key, record in reversed(routed):
        if key not in keys:
            continue
        miss = wanted.get((key, record.source))
        if miss is not None and miss.tx_id is not None and miss.tx_id in seen_after[key]:
            rewritten.add(miss.source)
        seen_after[key].add(miss.tx_id if miss is not None else tx_id_of(record))
    return rewritten


def batch_reselect(hydrator: Hydrator, config: RunConfig) -> BatchReselect | None:
    """The run's re-select step (None without `--reselect`)."""
    if config.reselect is None:
        return None
    forms = PlaceholderForms(config.format_options.placeholder_bytes)
    return BatchReselect(hydrator, PostgresReselect(config.reselect, forms))
