"""Which columns of a Debezium Postgres event a re-select could fill, and where to read them:
the table (`source.schema`/`source.table`), the primary key (the Kafka key's fields), the
event's transaction (`source.txId`) and the placeholder shipped for each column; and which
records of a stream leave such columns (MissFinder, both engines' re-select step). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from hydrator import exact
from hydrator.core.hydrator import Hydrator
from hydrator.core.records import HEADER_SOURCE, HEADER_UNRESOLVED, Transition
from hydrator.core.settings import OnUnresolved
from hydrator.events import RawRecord, Read
from hydrator.formats.debezium import unwrap
from hydrator.formats.keys import key_document
from hydrator.formats.placeholders import PlaceholderForms
from state.handoff import Handoff
from state.record import StateRecord


@dataclass(frozen=True)
class Miss:
    """An event's columns that neither state nor a handoff could fill."""

    source: str  # the record's topic:partition:offset
    state_key: str  # the canonical key its state lives under
    schema: str
    table: str
    key_columns: tuple[str, ...]
    key: tuple[Any, ...]
    tx_id: int | None
    shipped: Mapping[str, Any]  # column -> the placeholder the event carried for it


def miss_of(
    record: RawRecord,
    state_key: str,
    columns: tuple[str, ...],
    forms: PlaceholderForms | None = None,
) -> Miss | None:
    """The re-select request for `columns` of `record`'s `after`; None when the record does not
    say where its row is (not a Postgres event, no key, a key that is not an object of integers
    and strings). An event without `source.connector` is taken for a Postgres one. With `forms`,
    only the columns `after` holds a placeholder for (an unresolved column can be one that only
    a `before` taken from the state lacks: `after` ships its value); None when none is left."""
    if record.key is None or record.value is None or not columns:
        return None
    try:
        key = key_document(record.key)
        payload, _ = unwrap(exact.loads(record.value))
    except Exception:
        return None
    source, after = payload.get("source"), payload.get("after")
    if not isinstance(source, dict) or not isinstance(after, dict) or not isinstance(key, dict):
        return None
    if source.get("connector", "postgresql") != "postgresql":
        return None  # another database's event (MySQL, SQL Server, ...): not ours to read
    schema, table = source.get("schema"), source.get("table")
    if not isinstance(schema, str) or not isinstance(table, str) or not key:
        return None
    if not all(isinstance(v, int | str) and not isinstance(v, bool) for v in key.values()):
        return None
    tx_id = source.get("txId")
    shipped = {column: after[column] for column in columns if column in after}
    if forms is not None:
        shipped = {column: value for column, value in shipped.items() if forms.matches_shape(value)}
        if not shipped:
            return None
    return Miss(
        record.source,
        state_key,
        schema,
        table,
        tuple(key),
        tuple(key.values()),
        tx_id if type(tx_id) is int else None,
        shipped,
    )


def tx_id_of(record: RawRecord) -> int | None:
    """The record's `source.txId`, if it has one."""
    try:
        payload, _ = unwrap(exact.loads(record.value or b""))
        tx_id = payload.get("source", {}).get("txId")
    except Exception:
        return None
    return tx_id if type(tx_id) is int else None


def placeholder_patterns(forms: PlaceholderForms) -> tuple[bytes, ...]:
    """Byte strings one of which is in every JSON value holding a placeholder: the text (also
    inside arrays and hstore), its base64 spellings, the name-based uuid, and the start of the
    integer-array spelling (compact, as Kafka Connect's JsonConverter writes)."""
    ints = ",".join(str(b) for b in forms.byte_ints[:8])
    spellings = (forms.text, forms.base64, forms.base64_url, forms.uuid, ints)
    return tuple(dict.fromkeys(s.encode() for s in spellings if s))


def may_hold(value: bytes | None, patterns: tuple[bytes, ...]) -> bool:
    """Whether a record's value may hold a placeholder (a substring search: cheap)."""
    return value is not None and any(p in value for p in patterns)


def source_of(headers: Iterable[tuple[str, bytes | None]]) -> str | None:
    """The input record an output came from (its `hydrator.source` header: the last one, the
    core's own, should the record have come in with one)."""
    found = None
    for name, value in headers:
        if name == HEADER_SOURCE and value is not None:
            found = value
    return found.decode() if found is not None else None


def unresolved_of(headers: Iterable[tuple[str, bytes | None]]) -> tuple[str, ...]:
    """The columns an output's `hydrator.unresolved` header lists."""
    for name, value in headers:
        if name == HEADER_UNRESOLVED and value:
            return tuple(value.decode().split(","))
    return ()


class MissFinder:
    """Finds the records whose hydration leaves a column unresolved that the source could give,
    without a second way of applying the rules: a scratch pass of the core (pure: nothing is
    sent or stored) that keeps what it cannot fill, then `miss_of` on what comes out
    unresolved. Only records that may hold a placeholder (`may_miss`) need the pass."""

    def __init__(self, hydrator: Hydrator, forms: PlaceholderForms) -> None:
        # The scratch pass must not stop the run (fail) or make headers nobody reads.
        settings = replace(hydrator.settings, on_unresolved=OnUnresolved.KEEP, changed_header=False)
        self.scratch = Hydrator(hydrator.codec, settings)
        self.forms = forms
        self.patterns = placeholder_patterns(forms)

    def may_miss(self, record: RawRecord) -> bool:
        """Whether `record` may hold a placeholder (its spellings are looked for in the bytes):
        a record without one costs that substring search and nothing else."""
        return may_hold(record.value, self.patterns)

    def find(
        self, state: StateRecord | None, read: Read, key: str, now_ms: int
    ) -> tuple[Transition, Miss | None]:
        """The scratch transition of `read`'s record from `state` (its key's), and what of its
        `after` a re-select should fill: only columns `after` ships a placeholder for (one a
        `before` from the state lacks has its value in `after`). None when nothing."""
        step = self.scratch.process(state, read, key, now_ms)
        for out in step.emitted:
            columns = unresolved_of(out.headers)
            miss = miss_of(read.record, key, columns, self.forms) if columns else None
            if miss is not None:
                return step, miss
        return step, None

    def find_released(
        self, state: StateRecord | None, handoff: Handoff, now_ms: int
    ) -> tuple[Transition, list[Miss]]:
        """The scratch transition of `handoff` reaching its new key's `state`, and what a
        re-select should fill in the records it releases (a key change's CREATE and what was
        parked behind it), in their order: a handoff without the old image (the old key had
        none) is a miss like any other."""
        step = self.scratch.receive_handoff(state, handoff, now_ms)
        parked = {record.source: record for record in state.parked} if state is not None else {}
        misses = []
        if parked:
            for out in step.emitted:
                columns = unresolved_of(out.headers)
                source = source_of(out.headers) if columns else None
                record = parked.get(source) if source is not None else None
                miss = miss_of(record, handoff.new_key, columns, self.forms) if record else None
                if miss is not None:
                    misses.append(miss)
        return step, misses
