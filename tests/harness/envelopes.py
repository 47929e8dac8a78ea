"""The oracle (tests/harness/oracle.py) in the other envelopes real Debezium deployments use:
Avro through a schema registry (Kafka Connect's AvroConverter), flattened rows (Debezium's
ExtractNewRecordState SMT), and both together. One Debezium run over the twin tables feeds one
topic pair per envelope; the phases of a run may include DDL on both twins (schema evolution).

Comparing: Avro values are decoded with the schema their id names (from the registry); a
flattened row is compared as Debezium's `after` (or, for a rewritten delete, `before`), its
`__` fields aside.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydrator.demo.connect import FLATTEN_SETTINGS
from hydrator.formats.avro import AvroKeys, is_framed, read, schema_id_of
from hydrator.formats.flat import columns
from hydrator.formats.registry import SchemaRegistry
from tests.harness import oracle
from tests.harness.debezium import BridgeOptions, DebeziumBridge, Output
from tests.harness.oracle import Captured, Event, TwinCapture, TwinTables, Workload
from tests.harness.postgres import PgDatabase


@dataclass(frozen=True)
class Envelope:
    name: str
    avro: bool
    flat: bool

    def records_per(self, kind: str) -> int:
        """Records per statement: the SMT (`rewrite`) drops the connector's tombstones."""
        if kind == "ddl":
            return 0
        if self.flat:
            return {"delete": 1, "pk_change": 2}.get(kind, 1)
        return {"delete": 2, "pk_change": 3}.get(kind, 1)


ENVELOPES = {
    "avro": Envelope("avro", avro=True, flat=False),
    "flat": Envelope("flat", avro=False, flat=True),
    "flat-avro": Envelope("flat-avro", avro=True, flat=True),
}

# A phase of a run: a workload, DDL on both twins (`{table}` filled), or a function of the
# database and twins that makes the next workload (it may look up which rows are live).
Phase = Workload | str | Callable[[PgDatabase, TwinTables], Workload]


def ddl(template: str) -> Workload:
    return Workload.of(oracle.Statement("ddl", template, ()))


def capture(
    db: PgDatabase,
    bootstrap_servers: str,
    registry_url: str,
    phases: Sequence[Phase],
    base: str,
    envelopes: Sequence[str] = ("avro", "flat", "flat-avro"),
    partitions: int = 3,
) -> dict[str, TwinCapture]:
    """One Debezium run over fresh twins `<base>_def`/`<base>_full`, the phases run in order,
    each envelope's records read back from `<base>.<envelope>.default|full`."""
    twins = oracle.create_twin_tables(db, base)
    chosen = [ENVELOPES[e] for e in envelopes]
    options = BridgeOptions(tables=twins.qualified, partitions=partitions)
    debezium_topics = [options.debezium_topic(t) for t in twins.qualified]

    def output(envelope: Envelope) -> Output:
        topics = [f"{base}.{envelope.name}.default", f"{base}.{envelope.name}.full"]
        return Output(
            False,
            dict(zip(debezium_topics, topics, strict=True)),
            registry_url if envelope.avro else None,
            FLATTEN_SETTINGS if envelope.flat else None,
        )

    first, *others = [output(e) for e in chosen]
    options.topic_map = dict(first.topic_map)
    options.extra_outputs = others
    # the first output is built from schemas_enable/topic_map: give it its converter and SMT
    outputs = [first, *others]
    executed: list[oracle.Statement] = []
    bridge = _Bridge(db, bootstrap_servers, options, outputs)
    with bridge:
        for phase in phases:
            workload = _workload(phase, db, twins)
            oracle.run_workload(db, twins, workload)
            executed += workload.statements
        for envelope, out in zip(chosen, outputs, strict=True):
            expected = sum(envelope.records_per(s.kind) for s in executed)
            for topic in out.topic_map.values():
                bridge.wait_for(expected, topic=topic, timeout_s=90)
        bridge.wait_quiet(0.5)
        produced = dict(bridge.produced)
    whole = Workload([[s] for s in executed])
    captures = {}
    for envelope, out in zip(chosen, outputs, strict=True):
        default_topic, full_topic = out.topic_map.values()
        captures[envelope.name] = TwinCapture(
            twins,
            options,
            default_topic,
            full_topic,
            oracle.consume_all(bootstrap_servers, default_topic, expected=produced[default_topic]),
            oracle.consume_all(bootstrap_servers, full_topic, expected=produced[full_topic]),
            whole,
        )
    return captures


class _Bridge(DebeziumBridge):
    """The bridge with every output's converter and SMT as given (BridgeOptions.outputs builds
    the first from `schemas_enable` alone)."""

    def __init__(
        self, db: PgDatabase, bootstrap: str, options: BridgeOptions, outputs: list[Output]
    ) -> None:
        super().__init__(db, bootstrap, options)
        self.outputs = outputs
        self.topics = {t for o in outputs for t in o.topic_map.values()}


def _workload(phase: Phase, db: PgDatabase, twins: TwinTables) -> Workload:
    if isinstance(phase, str):
        return ddl(phase)
    if isinstance(phase, Workload):
        return phase
    return phase(db, twins)


def live_ids(db: PgDatabase, twins: TwinTables) -> list[int]:
    with db.connect() as conn:
        rows = conn.execute(f'SELECT id FROM "{twins.default}" ORDER BY id').fetchall()
    return [int(r[0]) for r in rows]


# -- reading records back ------------------------------------------------------------------------


class Reader:
    """Decodes an envelope's records into oracle Events (Avro: with the schema its id names)."""

    def __init__(self, envelope: str, registry_url: str | None) -> None:
        self.envelope = ENVELOPES[envelope]
        self.registry = SchemaRegistry(registry_url) if registry_url else None

    def document(self, value: bytes | None) -> Any:
        if value is None:
            return None
        if self.envelope.avro:
            assert self.registry is not None and is_framed(value), value[:8]
            return read(self.registry.schema(schema_id_of(value)), value[5:])
        return oracle.payload(value)

    def key(self, key: bytes | None) -> str:
        if key is not None and is_framed(key):
            assert self.registry is not None
            return AvroKeys(self.registry).canonical(key)
        return oracle.canonical_key(key)

    def as_change(self, document: Any) -> dict[str, Any] | None:
        """A flattened row as Debezium's change event (op, after or before), `__` fields
        aside; an envelope as it is."""
        if document is None or not self.envelope.flat:
            return document
        op = document.get("__op")
        row = columns(document)
        if op == "d":
            return {"op": op, "before": row, "after": None}
        return {"op": op, "before": None, "after": row}

    def events_by_key(self, records: Iterable[Captured]) -> dict[str, list[Event]]:
        grouped: dict[str, list[Event]] = defaultdict(list)
        for r in records:
            key = self.key(r.key)
            value = self.as_change(self.document(r.value))
            grouped[key].append(Event(key, value, f"{r.topic}:{r.partition}:{r.offset}"))
        return dict(grouped)


def compare(
    reader: Reader, hydrated: Iterable[Captured], full: Iterable[Captured]
) -> list[oracle.Mismatch]:
    """oracle.compare over decoded records. A flattened row has no `before` but a delete's."""
    return oracle.compare(reader.events_by_key(hydrated), reader.events_by_key(full))


def schema_ids(records: Iterable[Captured]) -> Mapping[str, int]:
    """`topic:partition:offset` -> the value's schema id, for framed values."""
    return {
        f"{r.topic}:{r.partition}:{r.offset}": schema_id_of(r.value)
        for r in records
        if r.value is not None and is_framed(r.value)
    }
