"""The oracle (docs/testing.md): one workload on two twin tables, hydrated events vs full images.

`<base>_def` keeps the default replica identity, so Debezium ships placeholders for unchanged
TOASTed columns, `before = null` on updates and a key-only `before` on deletes. `<base>_full` has
REPLICA IDENTITY FULL, so Debezium ships full images. Every statement runs on both tables with the
same parameters; hydrating the first table's events must reproduce the second's, event by event
per key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from confluent_kafka import Consumer, KafkaError
from psycopg import sql
from psycopg.types.hstore import register_hstore
from psycopg.types.json import Jsonb

from hydrator.kafka.offsets import from_the_start
from tests.harness.debezium import BinaryHandlingMode, BridgeOptions, DebeziumBridge, Output
from tests.harness.postgres import PgDatabase

if TYPE_CHECKING:
    # the core is imported only where it is used, so the bridge tests do not depend on it
    from hydrator.core import DeadLetter, Hydrator, OutputRecord, Transition

# Well above the ~2 KB TOAST threshold: with STORAGE EXTERNAL every such value goes out of line
# uncompressed, so an UPDATE that does not touch it leaves an unchanged TOAST pointer.
BIG = 3000

# Columns an UPDATE can touch besides the key; the first two stay small (inline, never TOASTed).
SMALL_COLUMNS = ("small", "label")
TOAST_COLUMNS = ("body", "doc", "blob", "tags", "nums", "bigs", "uids", "attrs")
COLUMNS = ("id", *SMALL_COLUMNS, *TOAST_COLUMNS)

_DDL = """
CREATE TABLE {table} (
    id    integer PRIMARY KEY,
    small integer,
    label varchar(40),
    body  text,
    doc   jsonb,
    blob  bytea,
    tags  text[],
    nums  integer[],
    bigs  bigint[],
    uids  uuid[],
    attrs hstore
)"""

# Casts keep psycopg's parameter types from deciding the column type (int lists would be int8[]).
_CASTS = {
    "id": "integer",
    "small": "integer",
    "label": "varchar",
    "body": "text",
    "doc": "jsonb",
    "blob": "bytea",
    "tags": "text[]",
    "nums": "integer[]",
    "bigs": "bigint[]",
    "uids": "uuid[]",
    "attrs": "hstore",
}


@dataclass(frozen=True)
class TwinTables:
    """The twin table names (schema `public`)."""

    base: str

    @property
    def default(self) -> str:
        return f"{self.base}_def"

    @property
    def full(self) -> str:
        return f"{self.base}_full"

    @property
    def qualified(self) -> list[str]:
        return [f"public.{self.default}", f"public.{self.full}"]


def create_twin_tables(db: PgDatabase, base: str) -> TwinTables:
    twins = TwinTables(base)
    with db.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS hstore")
        for table in (twins.default, twins.full):
            ident = sql.Identifier(table)
            conn.execute(sql.SQL(_DDL).format(table=ident))
            for column in TOAST_COLUMNS:
                conn.execute(
                    sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE EXTERNAL").format(
                        ident, sql.Identifier(column)
                    )
                )
        conn.execute(
            sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(sql.Identifier(twins.full))
        )
    return twins


# -- placeholders ---------------------------------------------------------------------------------

PLACEHOLDER = "__debezium_unavailable_value"


def _name_uuid(data: bytes) -> str:
    """Java's UUID.nameUUIDFromBytes (MD5, version 3), which Debezium applies to P for uuid[]."""
    b = bytearray(hashlib.md5(data).digest())
    b[6] = b[6] & 0x0F | 0x30
    b[8] = b[8] & 0x3F | 0x80
    return str(uuid.UUID(bytes=bytes(b)))


def placeholder_shapes(
    binary_mode: str = "bytes", hstore_mode: str = "json", placeholder: str = PLACEHOLDER
) -> dict[str, Any]:
    """How Debezium's placeholder arrives in decoded JSON for each TOAST column of the twins
    (docs/formats.md), given `binary.handling.mode` and `hstore.handling.mode` (Debezium default
    json).

    In the base64 and base64-url-safe modes Debezium 3.6 turns an unchanged TOASTed bytea into
    `null` (logging "Unexpected JDBC BINARY value"), indistinguishable from a real NULL, so
    there is no shape for `blob` then.
    """
    p = placeholder.encode()
    shapes: dict[str, Any] = {
        "body": placeholder,
        "doc": placeholder,
        "blob": base64.b64encode(p).decode() if binary_mode == "bytes" else placeholder,
        "tags": [placeholder],
        "nums": list(p),
        "bigs": list(p),
        "uids": [_name_uuid(p)],
        "attrs": (
            {placeholder: placeholder}
            if hstore_mode == "map"
            else json.dumps({placeholder: placeholder}, separators=(",", ":"))
        ),
    }
    if binary_mode not in ("bytes", "hex"):
        del shapes["blob"]
    return shapes


def placeholder_columns(image: Mapping[str, Any] | None, shapes: Mapping[str, Any]) -> list[str]:
    """The columns of `image` holding the placeholder."""
    if not image:
        return []
    return [c for c, shape in shapes.items() if c in image and image[c] == shape]


# -- values ---------------------------------------------------------------------------------------


def _text(rng: random.Random, n: int) -> str:
    # base64 of random bytes: no repeats for pglz to find, so the size really is the size
    return base64.b64encode(rng.randbytes(n * 3 // 4 + 1)).decode()[:n]


def _value(rng: random.Random, column: str, size: str) -> Any:
    """A value for `column`: size "big" (TOASTed), "small" (inline) or "null"."""
    if size == "null":
        return None
    big = size == "big"
    if column == "small":
        return rng.randrange(1_000_000)
    if column == "label":
        return _text(rng, rng.randrange(1, 40))
    if column == "body":
        return _text(rng, rng.randrange(BIG, 2 * BIG) if big else rng.randrange(1, 200))
    if column == "doc":
        n = 12 if big else 1
        return {f"k{i}": _text(rng, 300) if big else rng.randrange(100) for i in range(n)} | {
            "nested": {"list": [rng.randrange(1000) for _ in range(3)], "flag": rng.random() < 0.5}
        }
    if column == "blob":
        return rng.randbytes(rng.randrange(BIG, 2 * BIG) if big else rng.randrange(1, 100))
    if column == "tags":
        return [_text(rng, 120) for _ in range(30)] if big else [_text(rng, 5), "x y"]
    if column == "nums":
        return [rng.randrange(-(2**31), 2**31) for _ in range(900 if big else 3)]
    if column == "bigs":
        return [rng.randrange(-(2**63), 2**63) for _ in range(450 if big else 3)]
    if column == "uids":
        return [uuid.UUID(int=rng.getrandbits(128)) for _ in range(220 if big else 2)]
    if column == "attrs":
        n = 30 if big else 2
        return {f"key{i}": _text(rng, 110) if big else "v" for i in range(n)}
    raise ValueError(column)


def _adapt(column: str, value: Any) -> Any:
    return Jsonb(value) if column == "doc" and value is not None else value


def _random_size(rng: random.Random) -> str:
    return rng.choices(("big", "small", "null"), weights=(80, 12, 8))[0]


def random_row(rng: random.Random) -> dict[str, Any]:
    """Non-key columns; TOAST columns mostly big, sometimes small or NULL."""
    return {
        c: _value(rng, c, _random_size(rng) if c in TOAST_COLUMNS else "small")
        for c in COLUMNS
        if c != "id"
    }


def big_row(rng: random.Random) -> dict[str, Any]:
    """Non-key columns with every TOAST column big (stored out of line)."""
    return {
        c: _value(rng, c, "big" if c in TOAST_COLUMNS else "small") for c in COLUMNS if c != "id"
    }


def small_value(rng: random.Random, column: str) -> Any:
    return _value(rng, column, "small")


# -- workload -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One SQL statement with its parameters; `{table}` is filled with each twin's name."""

    kind: str  # insert | update | delete | reinsert | pk_change
    template: str
    params: tuple[Any, ...]

    def compose(self, table: str) -> sql.Composed:
        return sql.SQL(self.template).format(table=sql.Identifier(table))


_RECORDS_PER_KIND = {"insert": 1, "reinsert": 1, "update": 1, "delete": 2, "pk_change": 3}


@dataclass
class Workload:
    """A seeded statement sequence grouped into transactions; the same for both twins."""

    transactions: list[list[Statement]] = field(default_factory=list)

    @classmethod
    def of(cls, *statements: Statement) -> Workload:
        """A scripted workload, one statement per transaction."""
        return cls([[s] for s in statements])

    @property
    def statements(self) -> Iterator[Statement]:
        for tx in self.transactions:
            yield from tx

    def count(self, kind: str) -> int:
        return sum(1 for s in self.statements if s.kind == kind)

    def expected_records(self) -> int:
        """Records Debezium produces per table: a delete is followed by a Kafka tombstone, a
        primary-key change is DELETE + tombstone (old key) + CREATE (new key)."""
        return sum(_RECORDS_PER_KIND[s.kind] for s in self.statements)


def insert_statement(kind: str, key: int, row: dict[str, Any]) -> Statement:
    cols = ["id", *row]
    template = (
        "INSERT INTO {table} ("
        + ", ".join(cols)
        + ") VALUES ("
        + ", ".join(f"%s::{_CASTS[c]}" for c in cols)
        + ")"
    )
    return Statement(kind, template, (key, *(_adapt(c, v) for c, v in row.items())))


def update_statement(key: int, changes: dict[str, Any], new_key: int | None = None) -> Statement:
    sets = [f"{c} = %s::{_CASTS[c]}" for c in changes]
    params: list[Any] = [_adapt(c, v) for c, v in changes.items()]
    if new_key is not None:
        sets.insert(0, "id = %s")
        params.insert(0, new_key)
    template = "UPDATE {table} SET " + ", ".join(sets) + " WHERE id = %s"
    return Statement("pk_change" if new_key is not None else "update", template, (*params, key))


def delete_statement(key: int) -> Statement:
    return Statement("delete", "DELETE FROM {table} WHERE id = %s", (key,))


def generate_workload(
    seed: int = 7, operations: int = 200, initial_rows: int = 12, max_tx_size: int = 3
) -> Workload:
    """Inserts, updates of random column subsets (mostly only the small columns, so TOASTed
    ones go unchanged), deletes, re-inserts of deleted ids and primary-key changes."""
    rng = random.Random(seed)
    live: set[int] = set()
    deleted: set[int] = set()
    next_id = 1
    stmts: list[Statement] = []

    def fresh_id() -> int:
        nonlocal next_id
        next_id += 1
        return next_id - 1

    for _ in range(initial_rows):
        key = fresh_id()
        stmts.append(insert_statement("insert", key, random_row(rng)))
        live.add(key)

    weights = {
        "update_small": 40,
        "update_some": 20,
        "insert": 8,
        "delete": 8,
        "reinsert": 6,
        "pk_change": 10,
        "update_same": 3,
    }
    while len(stmts) < initial_rows + operations:
        op = rng.choices(list(weights), weights=list(weights.values()))[0]
        if op == "insert" or not live:
            key = fresh_id()
            stmts.append(insert_statement("insert", key, random_row(rng)))
            live.add(key)
        elif op == "reinsert":
            if not deleted:
                continue
            key = rng.choice(sorted(deleted))
            deleted.discard(key)
            stmts.append(insert_statement("reinsert", key, random_row(rng)))
            live.add(key)
        elif op == "delete":
            key = rng.choice(sorted(live))
            live.discard(key)
            deleted.add(key)
            stmts.append(delete_statement(key))
        elif op == "pk_change":
            key = rng.choice(sorted(live))
            # a deleted id sometimes, so the new key's state holds a tombstone
            new_key = rng.choice(sorted(deleted)) if deleted and rng.random() < 0.3 else fresh_id()
            deleted.discard(new_key)
            live.discard(key)
            live.add(new_key)
            deleted.add(key)
            changes = {"small": _value(rng, "small", "small")} if rng.random() < 0.5 else {}
            stmts.append(update_statement(key, changes, new_key=new_key))
        elif op == "update_same":
            # assigning a column to itself keeps its TOAST pointer: still "unchanged"
            key = rng.choice(sorted(live))
            col = rng.choice(TOAST_COLUMNS)
            stmts.append(
                Statement(
                    "update",
                    f"UPDATE {{table}} SET {col} = {col}, small = small + 1 WHERE id = %s",
                    (key,),
                )
            )
        else:
            key = rng.choice(sorted(live))
            if op == "update_small":
                cols = rng.sample(SMALL_COLUMNS, rng.randint(1, 2))
            else:
                cols = rng.sample(TOAST_COLUMNS, rng.randint(1, 4)) + rng.sample(
                    SMALL_COLUMNS, rng.randint(0, 1)
                )
            changes = {
                c: _value(rng, c, _random_size(rng) if c in TOAST_COLUMNS else "small")
                for c in cols
            }
            stmts.append(update_statement(key, changes))

    workload = Workload()
    i = 0
    while i < len(stmts):
        n = rng.randint(1, max_tx_size)
        workload.transactions.append(stmts[i : i + n])
        i += n
    return workload


def run_workload(db: PgDatabase, twins: TwinTables, workload: Workload) -> int:
    """Run every transaction on both twins (the default-identity table first), DDL included;
    returns the number of statements executed per table."""
    executed = 0
    with psycopg.connect(db.dsn) as conn:
        info = psycopg.types.TypeInfo.fetch(conn, "hstore")
        if info is None:
            raise RuntimeError("hstore extension missing")
        register_hstore(info, conn)
        for tx in workload.transactions:
            for table in (twins.default, twins.full):
                with conn.transaction():
                    for stmt in tx:
                        cur = conn.execute(stmt.compose(table), stmt.params)
                        if stmt.kind != "ddl" and cur.rowcount != 1:
                            raise AssertionError(f"{stmt.kind} on {table} hit {cur.rowcount} rows")
            executed += len(tx)
    return executed


# -- collecting events from the broker -------------------------------------------------------------


@dataclass(frozen=True)
class Captured:
    """One record as read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int = 0

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)

    def to_json(self) -> dict[str, Any]:
        """The /work/samples JSONL shape: raw strings, headers as [name, string]."""

        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("utf-8", errors="backslashreplace")

        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key": text(self.key),
            "value": text(self.value),
            "headers": [[k, text(v)] for k, v in self.headers],
        }


def consume_all(
    bootstrap_servers: str, topic: str, expected: int | None = None, timeout_s: float = 60.0
) -> list[Captured]:
    """Everything in `topic` (every partition read to its end), in (partition, offset) order.

    The end of a partition is where the fetch reports end-of-partition, not the ListOffsets high
    watermark: Tansu answers ListOffsets(latest) with the last *batch's* base offset + 1, which
    stops short of the batch's other records. With `expected`, also wait until that many records
    were read (the producer may still be landing them).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"oracle-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.message.max.bytes": 16 * 1024 * 1024,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"topic {topic}: {meta.error}")
        consumer.assign(from_the_start(topic, meta.partitions))
        at_end: set[int] = set()
        out: list[Captured] = []
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(meta.partitions) or (expected is not None and len(out) < expected):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{topic}: read {len(out)} records, partitions at end "
                    f"{sorted(at_end)} of {len(meta.partitions)} after {timeout_s}s"
                )
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise RuntimeError(f"{topic}: {err}")
            at_end.discard(msg.partition())
            out.append(
                Captured(
                    topic,
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
        return sorted(out, key=lambda c: (c.partition, c.offset))
    finally:
        consumer.close()


def dump_jsonl(records: Iterable[Captured], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_json()) + "\n")
            n += 1
    return n


# -- comparing ---------------------------------------------------------------------------------


def payload(data: bytes | None) -> Any:
    """Decoded JSON without a `{schema, payload}` wrapper; None for a tombstone."""
    if data is None:
        return None
    obj = json.loads(data)
    if isinstance(obj, dict) and set(obj) == {"schema", "payload"}:
        return obj["payload"]
    return obj


def canonical_key(key: bytes | None) -> str:
    """The canonical key of docs/rules.md: payload JSON, sorted fields, no whitespace."""
    return json.dumps(payload(key), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Event:
    """A decoded change event of one key; value None = Kafka tombstone."""

    key: str
    value: dict[str, Any] | None
    where: str  # topic:partition:offset of the record, for mismatch reports

    @property
    def op(self) -> str | None:
        return None if self.value is None else self.value.get("op")


def events_by_key(
    records: Iterable[tuple[bytes | None, bytes | None, str]],
) -> dict[str, list[Event]]:
    """Group (key, value, where) triples per canonical key, keeping their order."""
    grouped: dict[str, list[Event]] = defaultdict(list)
    for key, value, where in records:
        k = canonical_key(key)
        grouped[k].append(Event(k, payload(value), where))
    return dict(grouped)


@dataclass(frozen=True)
class Mismatch:
    key: str
    index: int
    field: str  # op | before | after | count | column name as "after.body"
    hydrated: Any
    expected: Any
    hydrated_at: str = ""
    expected_at: str = ""

    def __str__(self) -> str:
        def short(v: Any) -> str:
            s = json.dumps(v, default=str)
            return s if len(s) <= 120 else s[:117] + "..."

        return (
            f"key {self.key} event #{self.index} {self.field}: hydrated {short(self.hydrated)}"
            f" [{self.hydrated_at}] vs full {short(self.expected)} [{self.expected_at}]"
        )


def _compare_image(
    m: list[Mismatch],
    name: str,
    key: str,
    i: int,
    got: Any,
    want: Any,
    hydrated: Event,
    full: Event,
) -> None:
    if got == want:
        return
    if isinstance(got, dict) and isinstance(want, dict):
        for col in sorted(set(got) | set(want)):
            if got.get(col, "<absent>") != want.get(col, "<absent>"):
                m.append(
                    Mismatch(
                        key,
                        i,
                        f"{name}.{col}",
                        got.get(col, "<absent>"),
                        want.get(col, "<absent>"),
                        hydrated.where,
                        full.where,
                    )
                )
    else:
        m.append(Mismatch(key, i, name, got, want, hydrated.where, full.where))


def compare(
    hydrated: dict[str, list[Event]], full: dict[str, list[Event]], check_before: bool = True
) -> list[Mismatch]:
    """Pair the hydrated default-identity events with the FULL twin's, event by event per key,
    and report every difference in `op`, `after` and (with `check_before`) `before`.

    Tombstones pair with tombstones. `source`, `ts_*` and the schema differ between the twins
    (table name, LSN, timing) and are not compared.
    """
    mismatches: list[Mismatch] = []
    for key in sorted(set(hydrated) | set(full)):
        got, want = hydrated.get(key, []), full.get(key, [])
        if len(got) != len(want):
            mismatches.append(Mismatch(key, -1, "count", [e.op for e in got], [e.op for e in want]))
        for i, (h, f) in enumerate(zip(got, want, strict=False)):
            if (h.value is None) != (f.value is None) or h.op != f.op:
                mismatches.append(Mismatch(key, i, "op", h.op, f.op, h.where, f.where))
                continue
            if h.value is None or f.value is None:
                continue
            _compare_image(
                mismatches, "after", key, i, h.value.get("after"), f.value.get("after"), h, f
            )
            if check_before:
                _compare_image(
                    mismatches, "before", key, i, h.value.get("before"), f.value.get("before"), h, f
                )
    return mismatches


def captured_triples(records: Sequence[Captured]) -> list[tuple[bytes | None, bytes | None, str]]:
    return [(r.key, r.value, f"{r.topic}:{r.partition}:{r.offset}") for r in records]


def report(
    mismatches: Sequence[Mismatch], limit: int = 25, describe: Callable[[Mismatch], str] = str
) -> str:
    lines = [describe(m) for m in mismatches[:limit]]
    if len(mismatches) > limit:
        lines.append(f"... and {len(mismatches) - limit} more")
    return "\n".join(lines)


# -- one bridge run over both twins ----------------------------------------------------------


@dataclass(frozen=True)
class TwinCapture:
    """What one Debezium run of a workload over both twins put on the broker."""

    twins: TwinTables
    options: BridgeOptions
    default_topic: str
    full_topic: str
    default: list[Captured]
    full: list[Captured]
    workload: Workload


def capture_twins(
    db: PgDatabase,
    bootstrap_servers: str,
    workload: Workload,
    base: str,
    *,
    schemas_enable: bool = False,
    binary_handling_mode: BinaryHandlingMode | None = None,  # None: the shared settings'
    partitions: int = 3,
    extra_properties: Mapping[str, str] | None = None,
) -> TwinCapture:
    """Create the twin tables `<base>_def`/`<base>_full`, stream them through a fresh Debezium
    bridge into topics `<base>.default[.schemas]`/`<base>.full[.schemas]` while the workload
    runs, and read both topics back. The slot and publication are gone when this returns."""
    return capture_twins_envelopes(
        db,
        bootstrap_servers,
        workload,
        base,
        envelopes=(schemas_enable,),
        binary_handling_mode=binary_handling_mode,
        partitions=partitions,
        extra_properties=extra_properties,
    )[schemas_enable]


def capture_twins_envelopes(
    db: PgDatabase,
    bootstrap_servers: str,
    workload: Workload,
    base: str,
    *,
    envelopes: Sequence[bool] = (True, False),
    binary_handling_mode: BinaryHandlingMode | None = None,  # None: the shared settings'
    partitions: int = 3,
    extra_properties: Mapping[str, str] | None = None,
) -> dict[bool, TwinCapture]:
    """`capture_twins` for several `schemas.enable` settings from ONE Debezium run (the converter
    is the only difference, so the same SourceRecords are serialized once per setting)."""
    twins = create_twin_tables(db, base)

    def topics(schemas: bool) -> tuple[str, str]:
        suffix = ".schemas" if schemas else ""
        return f"{base}.default{suffix}", f"{base}.full{suffix}"

    first, *others = envelopes
    options = BridgeOptions(
        tables=twins.qualified,
        schemas_enable=first,
        binary_handling_mode=binary_handling_mode,
        partitions=partitions,
        extra_properties=dict(extra_properties or {}),
    )
    debezium_topics = [options.debezium_topic(t) for t in twins.qualified]
    options.topic_map = dict(zip(debezium_topics, topics(first), strict=True))
    options.extra_outputs = [
        Output(schemas, dict(zip(debezium_topics, topics(schemas), strict=True)))
        for schemas in others
    ]
    expected = workload.expected_records()
    with DebeziumBridge(db, bootstrap_servers, options) as bridge:
        run_workload(db, twins, workload)
        for topic in bridge.topics:
            bridge.wait_for(expected, topic=topic, timeout_s=180)
        # anything beyond the expected count would be a workload/harness bug worth seeing
        bridge.wait_quiet(0.5)
        produced = dict(bridge.produced)
    captures = {}
    for schemas in envelopes:
        default_topic, full_topic = topics(schemas)
        captures[schemas] = TwinCapture(
            twins,
            options,
            default_topic,
            full_topic,
            consume_all(bootstrap_servers, default_topic, expected=produced[default_topic]),
            consume_all(bootstrap_servers, full_topic, expected=produced[full_topic]),
            workload,
        )
    return captures


# -- hydration through the core ------------------------------------------------------------------


@dataclass
class CoreRun:
    """Outputs of the core over one input sequence, as an engine would have produced them."""

    emitted: list[OutputRecord] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    states: dict[tuple[str, str], Any] = field(default_factory=dict)

    def triples(self) -> list[tuple[bytes | None, bytes | None, str]]:
        """(key, value, source) of every emitted record, for `events_by_key`."""
        from hydrator.core.records import HEADER_SOURCE

        def source(o: OutputRecord) -> str:
            raw = next((v for k, v in o.headers if k == HEADER_SOURCE), None)
            return raw.decode() if raw else "?"

        return [(o.key, o.value, source(o)) for o in self.emitted]


def hydrate_with_core(hydrator: Hydrator, records: Iterable[Captured], now_ms: int = 0) -> CoreRun:
    """Feed records to the core in the given order, one state per (topic, canonical key), applying
    every handoff at once to the new key's state (as an engine owning both keys would)."""
    from hydrator.core import DeadLetter, RawRecord

    run = CoreRun()

    def apply(transition: Transition, state_key: tuple[str, str] | None) -> None:
        if state_key is not None:
            if transition.state is None:
                run.states.pop(state_key, None)
            else:
                run.states[state_key] = transition.state
        run.emitted.extend(transition.emitted)
        run.dead.extend(transition.dead)
        run.counts.update(transition.counts)
        for handoff in transition.handoffs:
            target = (handoff.topic, handoff.new_key)
            apply(hydrator.receive_handoff(run.states.get(target), handoff, now_ms), target)

    for rec in records:
        raw = RawRecord(
            rec.topic, rec.partition, rec.offset, rec.key, rec.value, rec.headers, rec.timestamp_ms
        )
        route = hydrator.route(raw)
        if isinstance(route, DeadLetter):
            run.dead.append(route)
            continue
        state_key = None if route is None else (raw.topic, route)
        state = None if state_key is None else run.states.get(state_key)
        apply(hydrator.process(state, raw, route, now_ms), state_key)
    return run


def interleaved(records: Sequence[Captured]) -> list[Captured]:
    """Round-robin over partitions by offset: the order a consumer sees when partitions advance
    together (the other extreme from partition after partition)."""
    return sorted(records, key=lambda r: (r.offset, r.partition))


# -- changed columns (header hydrator.changed) -------------------------------------------------

HEADER_CHANGED = "hydrator.changed"


def expected_changed(full: Mapping[str, Any]) -> set[str]:
    """The columns a REPLICA IDENTITY FULL event changed: the set difference of its `before`
    and `after` (every column on a create or snapshot read, none on a delete)."""
    op, before, after = full.get("op"), full.get("before"), full.get("after")
    if op == "d" or after is None:
        return set()
    if op in ("c", "r") or before is None:
        return set(after)
    return {c for c in after if c not in before or before[c] != after[c]}


def changed_mismatches(
    hydrated: Sequence[Any], full: Sequence[Captured], source_header: str = "hydrator.source"
) -> tuple[list[Mismatch], int]:
    """Compare the `hydrated.changed` header of every hydrated output (records with `key`,
    `value`, `headers`: Captured or the core's OutputRecord, in input order per key) with the
    FULL twin's before/after difference of the event at the same place in its key's sequence.
    Returns the mismatches and how many events were compared."""
    mine: dict[str, list[tuple[Any, str]]] = defaultdict(list)
    for out in hydrated:
        if out.value is None:
            continue  # a Kafka tombstone passes through, carrying no header of the hydrator
        headers = dict(out.headers)
        where = (headers.get(source_header) or b"?").decode()
        mine[canonical_key(out.key)].append((headers.get(HEADER_CHANGED), where))
    twins: dict[str, list[Captured]] = defaultdict(list)
    for record in full:
        if record.value is not None:
            twins[canonical_key(record.key)].append(record)
    mismatches: list[Mismatch] = []
    compared = 0
    for key in sorted(set(mine) | set(twins)):
        got, want = mine.get(key, []), twins.get(key, [])
        if len(got) != len(want):
            mismatches.append(Mismatch(key, -1, "count", len(got), len(want)))
        for i, ((header, where), twin) in enumerate(zip(got, want, strict=False)):
            compared += 1
            expected = expected_changed(payload(twin.value))
            if header is None:
                mismatches.append(Mismatch(key, i, "changed", None, sorted(expected), where))
                continue
            listed = [c for c in header.decode().split(",") if c]
            if len(listed) != len(set(listed)) or set(listed) != expected:
                twin_at = f"{twin.topic}:{twin.partition}:{twin.offset}"
                mismatches.append(
                    Mismatch(key, i, "changed", listed, sorted(expected), where, twin_at)
                )
    return mismatches, compared
