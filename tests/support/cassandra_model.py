"""A model of a Cassandra table and of the change events the Debezium Cassandra connector writes
for it (docs/formats.md), kept apart from the codec so tests can check hydration against it.

`CassandraTable` is the truth: every write with its write time; a read at time t is, per
column, the latest write before t (null when that write deleted the cell or its TTL had run
out). Each write is rendered as the connector renders it: a record key with the primary key, a
value `{"ts_ms", "op", "source", "after"}` whose `after` names every column, the written ones as
cells and the others null. `deliveries` then does to them what a cluster does: every replica's
connector sends each event, and a node logs writes in the order they reach it.

`expected_output` says, for events arriving in a given order, what hydration must produce:
each unwritten column filled from the latest write of that column among the events that arrived
before it. It is computed from the list of arrived writes, not from any state the hydrator keeps.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from hydrator import exact
from hydrator.events import RawRecord

TOPIC = "cass.inventory.customers"
KEY_COLUMNS = ("id", "ck")
REGULAR_COLUMNS = ("name", "score", "tags", "price", "note")
COLUMNS = KEY_COLUMNS + REGULAR_COLUMNS
RANGE_COLUMNS = ("_range_start", "_range_end")
BASE_TIME_US = 1_700_000_000_000_000

# Kafka Connect schemas of the column values (decimal.handling.mode=string for `price`)
VALUE_SCHEMAS: dict[str, dict[str, Any]] = {
    "id": {"type": "int64", "optional": True},
    "ck": {"type": "string", "optional": True},
    "name": {"type": "string", "optional": True},
    "score": {"type": "int64", "optional": True},
    "tags": {"type": "array", "items": {"type": "string", "optional": True}, "optional": True},
    "price": {"type": "string", "optional": True},
    "note": {"type": "string", "optional": True},
}

Key = tuple[int, str]


def cell(value: Any, deletion_ts: int | None = None) -> dict[str, Any]:
    return {"value": value, "deletion_ts": deletion_ts, "set": True}


def filled(value: Any) -> dict[str, Any]:
    return {"value": value, "deletion_ts": None, "set": False}


@dataclass
class Event:
    """One change event as the connector renders it; `op` None for a Kafka tombstone."""

    key: Key
    op: str | None
    time: int
    after: dict[str, Any] | None
    record_key: bytes
    value: bytes | None

    @property
    def writes_cells(self) -> bool:
        """Whether a row's state takes this event's cells (range tombstones and Kafka
        tombstones pass through)."""
        return self.op in ("i", "u", "d")


@dataclass
class CassandraTable:
    with_schema: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    clock: int = BASE_TIME_US
    position: int = 0
    writes: dict[Key, dict[str, list[tuple[int, dict[str, Any]]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    events: list[Event] = field(default_factory=list)

    # -- the statements a client runs --------------------------------------------------------

    def insert(self, key: Key, values: dict[str, Any], ttl_s: int | None = None) -> Event:
        return self._write("i", key, values, ttl_s)

    def update(self, key: Key, values: dict[str, Any], ttl_s: int | None = None) -> Event:
        """UPDATE ... SET (a NULL is written as a cell whose value is null)."""
        return self._write("u", key, values, ttl_s)

    def delete(self, key: Key, tombstone: bool = False) -> list[Event]:
        """DELETE FROM t WHERE id = ? AND ck = ?: every regular cell deleted at one time; with
        `tombstones.on.delete` the connector adds a Kafka tombstone."""
        time = self._tick()
        after = {c: self._key_cell(key, c) for c in KEY_COLUMNS}
        after.update({c: cell(None, time) for c in REGULAR_COLUMNS})
        events = [self._emit("d", key, time, after)]
        self._record(key, time, after)
        if tombstone:
            events.append(self._emit(None, key, time, None))
        return events

    def snapshot(self, key: Key) -> Event:
        """The connector's snapshot of one row: an insert of every column, at the time the
        snapshot ran, unset columns as written NULLs."""
        time = self._tick()
        latest = self._latest(key, time)
        after = {c: self._key_cell(key, c) for c in KEY_COLUMNS}
        for column in REGULAR_COLUMNS:
            stored = latest.get(column)
            if stored is None or value_at(stored, time) is None:
                after[column] = cell(None)
            else:  # a TTL keeps running: the snapshot reads it and writes its expiry
                after[column] = cell(stored["value"], stored["deletion_ts"])
        self._record(key, time, after)
        return self._emit("i", key, time, after, snapshot=True)

    def range_tombstone(self, partition: int, start: str, end: str) -> Event:
        """DELETE FROM t WHERE id = ? AND ck >= ? AND ck < ?: one event for the whole range,
        which no single row's state takes (docs/formats.md, known limits). Not applied to the
        truth either: tests that compare with the truth leave these out."""
        time = self._tick()
        marshal = "org.apache.cassandra.db.marshal.UTF8Type"
        after: dict[str, Any] = {c: None for c in COLUMNS}
        after["id"] = cell(partition)
        after["_range_start"] = {
            "method": "INCL_START_BOUND",
            "values": [{"name": "ck", "value": start, "type": marshal}],
        }
        after["_range_end"] = {
            "method": "EXCL_END_BOUND",
            "values": [{"name": "ck", "value": end, "type": marshal}],
        }
        return self._emit("r", (partition, ""), time, after, key_override={"id": partition})

    # -- the truth ---------------------------------------------------------------------------

    def read(self, key: Key, at: int) -> dict[str, Any]:
        """What a read at `at` returns for the columns ever written before it."""
        return {column: value_at(stored, at) for column, stored in self._latest(key, at).items()}

    def _latest(self, key: Key, at: int) -> dict[str, dict[str, Any]]:
        """Per column, the cell of its latest write before `at`."""
        latest = {}
        for column, history in self.writes[key].items():
            earlier = [(t, c) for t, c in history if t < at]
            if earlier:
                latest[column] = max(earlier, key=_by_time)[1]
        return latest

    # -- rendering ---------------------------------------------------------------------------

    def _write(self, op: str, key: Key, values: dict[str, Any], ttl_s: int | None) -> Event:
        time = self._tick()
        expires = time + ttl_s * 1_000_000 if ttl_s is not None else None
        after: dict[str, Any] = {c: self._key_cell(key, c) for c in KEY_COLUMNS}
        after.update({c: None for c in REGULAR_COLUMNS})
        after.update({c: cell(v, expires if v is not None else None) for c, v in values.items()})
        self._record(key, time, after)
        return self._emit(op, key, time, after)

    def _record(self, key: Key, time: int, after: dict[str, Any]) -> None:
        for column, written in after.items():
            if written is not None and column not in RANGE_COLUMNS:
                self.writes[key][column].append((time, written))

    def _tick(self) -> int:
        """Write times are distinct, so the latest write of a cell is never a tie."""
        self.clock += self.rng.randint(1, 5_000_000)
        return self.clock

    @staticmethod
    def _key_cell(key: Key, column: str) -> dict[str, Any]:
        return cell(key[KEY_COLUMNS.index(column)])

    def _emit(
        self,
        op: str | None,
        key: Key,
        time: int,
        after: dict[str, Any] | None,
        snapshot: bool = False,
        key_override: dict[str, Any] | None = None,
    ) -> Event:
        if key_override is None:
            key_payload = dict(zip(KEY_COLUMNS, key, strict=True))
        else:
            key_payload = {**dict.fromkeys(KEY_COLUMNS), **key_override}
        record_key = self._wrap(key_payload, key_schema())
        value = None
        if op is not None:
            assert after is not None
            after = {**after, **{c: after.get(c) for c in RANGE_COLUMNS}}
            self.position += 37
            payload = {
                "ts_ms": time // 1000 + 25,  # when the connector processed it
                "op": op,
                "source": source(time, self.position, snapshot),
                "after": after,
            }
            value = self._wrap(payload, value_schema())
        event = Event(key, op, time, after, record_key, value)
        self.events.append(event)
        return event

    def _wrap(self, payload: dict[str, Any], schema: dict[str, Any]) -> bytes:
        return exact.dumps({"schema": schema, "payload": payload} if self.with_schema else payload)


def source(time: int, position: int, snapshot: bool = False) -> dict[str, Any]:
    return {
        "version": "3.0.7.Final",
        "connector": "cassandra",
        "name": "cass",
        "ts_ms": time // 1000,
        "snapshot": "true" if snapshot else "false",
        "db": "NULL",
        "sequence": None,
        "ts_us": time,
        "ts_ns": time * 1000,
        "cluster": "Test Cluster",
        "file": "CommitLog-7-1700000000001.log",
        "pos": position,
        "keyspace": "inventory",
        "table": "customers",
    }


def value_at(stored: dict[str, Any], at: int) -> Any:
    """A cell's value as a read at `at` sees it: null once its TTL has run out."""
    expires = stored["deletion_ts"]
    return None if expires is not None and expires <= at else stored["value"]


def _by_time(write: tuple[int, dict[str, Any]]) -> int:
    return write[0]


def key_schema() -> dict[str, Any]:
    return {
        "type": "struct",
        "name": "io.debezium.connector.cassandra.cass.inventory.customers.Key",
        "optional": False,
        "fields": [
            {"type": "int64", "optional": False, "field": "id"},
            {"type": "string", "optional": False, "field": "ck"},
        ],
    }


def value_schema() -> dict[str, Any]:
    def cell_schema(column: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "name": "cell_value",
            "version": 1,
            "optional": True,
            "field": column,
            "fields": [
                {**VALUE_SCHEMAS[column], "field": "value"},
                {"type": "int64", "optional": True, "field": "deletion_ts"},
                {"type": "boolean", "optional": False, "field": "set"},
            ],
        }

    def range_schema(name: str) -> dict[str, Any]:
        item = {
            "type": "struct",
            "name": "clustering_value",
            "version": 1,
            "optional": False,
            "fields": [
                {"type": "string", "optional": False, "field": f} for f in ("name", "value", "type")
            ],
        }
        return {
            "type": "struct",
            "name": name,
            "version": 1,
            "optional": True,
            "field": name,
            "fields": [
                {"type": "string", "optional": False, "field": "method"},
                {
                    "type": "array",
                    "items": item,
                    "optional": False,
                    "name": "clustering_values",
                    "version": 1,
                    "field": "values",
                },
            ],
        }

    after = {
        "type": "struct",
        "name": "after",
        "version": 1,
        "optional": False,
        "field": "after",
        "fields": [cell_schema(c) for c in COLUMNS] + [range_schema(r) for r in RANGE_COLUMNS],
    }
    source_fields = [
        ("version", "string"),
        ("connector", "string"),
        ("name", "string"),
        ("ts_ms", "int64"),
        ("snapshot", "string"),
        ("db", "string"),
        ("sequence", "string"),
        ("ts_us", "int64"),
        ("ts_ns", "int64"),
        ("cluster", "string"),
        ("file", "string"),
        ("pos", "int32"),
        ("keyspace", "string"),
        ("table", "string"),
    ]
    return {
        "type": "struct",
        "name": "io.debezium.connector.cassandra.cass.inventory.customers.Envelope",
        "optional": False,
        "fields": [
            {"type": "int64", "optional": False, "field": "ts_ms"},
            {"type": "string", "optional": False, "field": "op"},
            {
                "type": "struct",
                "name": "source",
                "optional": False,
                "field": "source",
                "fields": [{"type": t, "optional": True, "field": n} for n, t in source_fields],
            },
            after,
        ],
    }


# -- a random workload -----------------------------------------------------------------------


def random_history(table: CassandraTable, rng: random.Random, keys: list[Key], steps: int) -> None:
    """Inserts, updates (NULLs and TTLs among them), deletes with Kafka tombstones, snapshot
    rows and range tombstones on `keys`, for end-to-end runs."""
    actions = ["insert", "update", "delete", "snapshot", "range"]
    for _ in range(steps):
        key = rng.choice(keys)
        action = rng.choices(actions, weights=[3, 8, 1, 1, 0.3])[0]
        ttl = rng.choice([None, None, None, None, 2, 5])
        if action == "insert":
            table.insert(key, random_values(rng), ttl)
        elif action == "update":
            table.update(key, random_values(rng), ttl)
        elif action == "delete":
            table.delete(key, tombstone=rng.random() < 0.5)
        elif action == "snapshot":
            table.snapshot(key)
        else:
            table.range_tombstone(key[0], "a", "m")


def random_values(rng: random.Random) -> dict[str, Any]:
    makers = {
        "name": lambda: rng.choice(["Anne", "Bob", "Chloé", "Dmitri"]) + str(rng.randint(0, 99)),
        "score": lambda: rng.choice([rng.randint(-1000, 1000), 2**63 - 1, -(2**63), 10**30]),
        "tags": lambda: [rng.choice("xyz") for _ in range(rng.randint(0, 3))],
        "price": lambda: f"{rng.randint(0, 10**20)}.{rng.randint(0, 999999):06d}",
        # now and then over the 2 KB past which state keeps a value compressed, apart
        "note": lambda: rng.choice("nop") * rng.choice([rng.randint(1, 40), 3000]),
    }
    columns = rng.sample(REGULAR_COLUMNS, rng.randint(1, len(REGULAR_COLUMNS)))
    return {c: None if rng.random() < 0.1 else makers[c]() for c in columns}


# -- what a cluster does to the events ------------------------------------------------------


def deliveries(
    events: list[Event], rng: random.Random, replicas: int = 3, reach: int = 6
) -> list[Event]:
    """Each event sent by 1 to `replicas` nodes' connectors, and each copy moved up to `reach`
    places from where it was written: replica duplicates and out-of-order delivery."""
    copies = [
        (index + rng.uniform(0, reach), event)
        for index, event in enumerate(events)
        for _ in range(rng.randint(1, replicas))
    ]
    copies.sort(key=lambda item: item[0])
    return [event for _, event in copies]


def records(arrivals: list[Event], topic: str = TOPIC) -> list[RawRecord]:
    return [
        RawRecord(topic, 0, offset, event.record_key, event.value)
        for offset, event in enumerate(arrivals)
    ]


# -- what hydration must produce ------------------------------------------------------------


@dataclass
class Expected:
    """The value hydration must write for one arrival, and the columns it fills and cannot."""

    value: bytes | None
    filled: tuple[str, ...]
    unresolved: tuple[str, ...]

    def document(self) -> Any:
        return None if self.value is None else exact.loads(self.value)


def expected_outputs(arrivals: list[Event], with_schema: bool = False) -> list[Expected]:
    """Per arrival: each column an insert or update did not write becomes the value of the
    latest write of that column among the events that arrived before (null once its TTL ran out
    at this event's time), marked `set: false`; a column no earlier arrival wrote stays null."""
    arrived: dict[Key, dict[str, list[tuple[int, dict[str, Any]]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    outputs = []
    for event in arrivals:
        if not event.writes_cells or event.op == "d":
            outputs.append(Expected(event.value, (), ()))
        else:
            assert event.after is not None
            after, done, unknown = dict(event.after), [], []
            for column in COLUMNS:
                if after[column] is not None:
                    continue
                history = arrived[event.key][column]
                if history:
                    after[column] = filled(value_at(max(history, key=_by_time)[1], event.time))
                    done.append(column)
                else:
                    unknown.append(column)
            outputs.append(
                Expected(_rewrite(event.value, after, with_schema), tuple(done), tuple(unknown))
            )
        if event.writes_cells:
            assert event.after is not None
            for column in COLUMNS:
                written = event.after[column]
                if written is not None:
                    arrived[event.key][column].append((event.time, written))
    return outputs


def _rewrite(value: bytes | None, after: dict[str, Any], with_schema: bool) -> bytes:
    assert value is not None
    document = exact.loads(value)
    payload = document["payload"] if with_schema else document
    payload["after"] = after
    return exact.dumps(document)


def payload_of(value: bytes) -> dict[str, Any]:
    document = orjson.loads(value)
    return document["payload"] if "schema" in document and "payload" in document else document


# -- hostile records, for fuzzing -------------------------------------------------------------


def fuzz_seed_documents(with_schema: bool) -> list[tuple[Any, Any]]:
    """Real-looking (key document, value document) pairs of each kind the connector writes,
    for tests/unit/formats/test_fuzz_decoders.py to mutate."""
    table = CassandraTable(with_schema, rng=random.Random(7))
    table.insert((1, "a"), {"name": "Anne", "score": 2**63 - 1, "price": "1.10"}, ttl_s=3)
    table.update((1, "a"), {"tags": ["x"], "note": None})
    table.delete((1, "a"), tombstone=True)
    table.snapshot((2, "b"))
    table.range_tombstone(1, "a", "c")
    return [
        (exact.loads(e.record_key), None if e.value is None else exact.loads(e.value))
        for e in table.events
    ]
