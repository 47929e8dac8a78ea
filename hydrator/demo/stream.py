"""A generated Debezium Postgres change stream, shaped as Debezium 3.x ships it through Kafka
Connect's JsonConverter under the default replica identity, and for every event what the
REPLICA IDENTITY FULL twin of the table would have shipped: the truth a hydrated stream must match.

What makes it faithful (docs/formats.md, checked against real Debezium output):
* an unchanged TOASTed value arrives as the placeholder in its column type's spelling: text and
  jsonb `"P"`, bytea (bytes mode) base64 of P, text[] `["P"]`, int[] P's bytes as integers,
  uuid[] the name-based UUID of P, hstore (json mode) `'{"P":"P"}'`; small (inline) and null
  values are shipped as they are, changed or not;
* `before` is null on updates and key-only on deletes; every delete is followed by a Kafka
  tombstone;
* `UPDATE ... SET id = new` is DELETE(old key, header `__debezium.newkey`) + tombstone (same
  header) + CREATE(new key, header `__debezium.oldkey`) whose `after` can hold placeholders; all
  three share one `source.sequence`;
* `source.sequence` is `'["<lastCommitLsn>","<lsn>"]'`, with a null commit LSN on the first event;
* with `schemas=True` key and value come in the `{"schema", "payload"}` envelope, with the
  field schemas Debezium's Postgres connector declares.
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from hydrator.formats.options import DEFAULT_PLACEHOLDER
from hydrator.formats.placeholders import PlaceholderForms

OLD_KEY_HEADER = "__debezium.oldkey"
NEW_KEY_HEADER = "__debezium.newkey"
TABLE = "customers"
DATABASE = "shop"

_JSON = {"name": "io.debezium.data.Json", "version": 1}
_UUID_ITEM = {"type": "string", "optional": True, "name": "io.debezium.data.Uuid", "version": 1}

# (column, Kafka Connect field schema, can be TOASTed). Postgres types: integer, varchar,
# integer, text, jsonb, bytea, text[], integer[], uuid[], hstore.
COLUMNS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("id", {"type": "int32", "optional": False}, False),
    ("name", {"type": "string", "optional": True}, False),
    ("visits", {"type": "int32", "optional": True}, False),
    ("bio", {"type": "string", "optional": True}, True),
    ("profile", {"type": "string", "optional": True, **_JSON}, True),
    ("avatar", {"type": "bytes", "optional": True}, True),
    (
        "tags",
        {"type": "array", "items": {"type": "string", "optional": True}, "optional": True},
        True,
    ),
    (
        "scores",
        {"type": "array", "items": {"type": "int32", "optional": True}, "optional": True},
        True,
    ),
    ("devices", {"type": "array", "items": _UUID_ITEM, "optional": True}, True),
    ("prefs", {"type": "string", "optional": True, **_JSON}, True),
)
TOAST_COLUMNS = tuple(name for name, _, toast in COLUMNS if toast)
SMALL_COLUMNS = ("name", "visits")

Row = dict[str, Any]
Headers = tuple[tuple[str, bytes], ...]


# Records a statement makes, where more than one: a delete and its tombstone; a key change's
# delete, tombstone and create.
_RECORDS_OF = {"delete": 2, "key_change": 3}


@dataclass(frozen=True)
class ChangeRecord:
    """One record of the stream as Kafka Connect would produce it, with its truth.

    `kind`: insert, update, delete, tombstone, key-change-delete, key-change-tombstone,
    key-change-create. `truth` is the FULL twin's `{"op", "before", "after"}` (None for a Kafka
    tombstone); `placeholders` the columns of `after` shipped as the placeholder.
    """

    key: bytes
    value: bytes | None
    headers: Headers
    kind: str
    truth: dict[str, Any] | None
    placeholders: tuple[str, ...] = ()


class DemoStream:
    """Generates the change stream of one table; deterministic for a seed."""

    def __init__(
        self,
        seed: int = 7,
        keys: int = 50,
        toast_size: int = 2500,
        schemas: bool = False,
        topic_prefix: str = "demo",
        placeholder: str = DEFAULT_PLACEHOLDER,
        touch_toast: float = 0.2,
    ) -> None:
        self.keys = keys
        self.toast_size = toast_size
        self.schemas = schemas
        self.topic_prefix = topic_prefix
        self.touch_toast = touch_toast
        self._rng = random.Random(seed)
        self._forms = PlaceholderForms(placeholder.encode())
        self._rows: dict[int, Row] = {}
        self._toasted: dict[int, set[str]] = {}
        self._deleted: set[int] = set()
        self._next_id = 1
        self._lsn = 0x2_100_000
        self._last_commit: int | None = None  # null on the stream's first event, as Debezium's
        self._started = False
        self._tx = 700
        self._ts_ms = 1_767_225_600_000
        self._context = _context_headers(topic_prefix, uuid.UUID(int=self._rng.getrandbits(128)))
        self._value_schema = _value_schema(self.topic)
        self._key_schema = {
            "type": "struct",
            "fields": [{"type": "int32", "optional": False, "field": "id"}],
            "optional": False,
            "name": f"{self.topic}.Key",
        }

    @property
    def topic(self) -> str:
        """Debezium's topic name: `<topic.prefix>.<schema>.<table>`."""
        return f"{self.topic_prefix}.public.{TABLE}"

    def placeholder_shape(self, column: str) -> Any:
        forms = self._forms
        return {
            "bio": forms.text,
            "profile": forms.text,
            "avatar": forms.base64,
            "tags": [forms.text],
            "scores": forms.byte_ints,
            "devices": [forms.uuid],
            "prefs": forms.hstore_json,
        }[column]

    # -- the workload ------------------------------------------------------------------------

    def records(self, count: int) -> list[ChangeRecord]:
        """Exactly `count` records: near the end, only statements that fit (a delete is two
        records, a key change three)."""
        out: list[ChangeRecord] = []
        for batch in self._statements(lambda: count - len(out)):
            out.extend(batch)
            if len(out) >= count:
                return out
        return out  # pragma: no cover - the statement stream is endless

    def _statements(self, room: Callable[[], int]) -> Iterator[list[ChangeRecord]]:
        """Statements' records, each statement no more records than `room()` says are left."""
        for _ in range(self.keys):
            yield self._insert(self._fresh_id())
        ops: dict[str, int] = {
            "update_small": 50,
            "update_toast": 15,
            "insert": 4,
            "delete": 6,
            "reinsert": 4,
            "key_change": 8,
        }
        actions: dict[str, Callable[[], list[ChangeRecord]]] = {
            "update_small": lambda: self._update(self._live(), toast=False),
            "update_toast": lambda: self._update(self._live(), toast=True),
            "insert": lambda: self._insert(self._fresh_id()),
            "delete": lambda: self._delete(self._live()),
            "reinsert": lambda: self._insert(self._rng.choice(sorted(self._deleted))),
            "key_change": lambda: self._key_change(self._live(), self._new_key()),
        }
        names, weights = list(ops), list(ops.values())
        while True:
            op = self._rng.choices(names, weights)[0]
            if not self._rows:
                op = "insert"
            elif op == "reinsert" and not self._deleted:
                op = "update_small"
            if _RECORDS_OF.get(op, 1) > room():
                op = "update_small"  # one record
            yield actions[op]()

    def _fresh_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _live(self) -> int:
        return self._rng.choice(list(self._rows))

    def _new_key(self) -> int:
        # Now and then a deleted id, so the new key's state holds a tombstone.
        if self._deleted and self._rng.random() < 0.3:
            return self._rng.choice(sorted(self._deleted))
        return self._fresh_id()

    # -- statements -> records ---------------------------------------------------------------

    def _insert(self, key: int) -> list[ChangeRecord]:
        row, toasted = self._random_row(key)
        self._rows[key], self._toasted[key] = row, toasted
        self._deleted.discard(key)
        self._advance()
        truth = {"op": "c", "before": None, "after": dict(row)}
        return [self._record(key, "insert", "c", None, dict(row), truth)]

    def _update(self, key: int, toast: bool) -> list[ChangeRecord]:
        old = self._rows[key]
        new = dict(old)
        toasted = set(self._toasted[key])
        new["visits"] = (old["visits"] or 0) + 1
        if self._rng.random() < 0.5:
            new["name"] = _word(self._rng, 12)
        if toast:
            for column in self._rng.sample(TOAST_COLUMNS, self._rng.randint(1, 3)):
                new[column], big = self._value(column)
                (toasted.add if big else toasted.discard)(column)
        changed = {c for c in new if new[c] != old[c]}
        after, shipped = self._ship(new, toasted - changed)
        self._rows[key], self._toasted[key] = new, toasted
        self._advance()
        truth = {"op": "u", "before": dict(old), "after": dict(new)}
        return [self._record(key, "update", "u", None, after, truth, shipped)]

    def _delete(self, key: int) -> list[ChangeRecord]:
        old = self._rows.pop(key)
        del self._toasted[key]
        self._deleted.add(key)
        self._advance()
        truth = {"op": "d", "before": dict(old), "after": None}
        return [
            self._record(key, "delete", "d", _key_only(key), None, truth),
            ChangeRecord(self._key(key), None, self._context, "tombstone", None),
        ]

    def _key_change(self, old_key: int, new_key: int) -> list[ChangeRecord]:
        """`UPDATE customers SET id = new, visits = visits + 1 WHERE id = old`."""
        old = self._rows.pop(old_key)
        toasted = self._toasted.pop(old_key)
        self._deleted.add(old_key)
        self._deleted.discard(new_key)
        new = {**old, "id": new_key, "visits": (old["visits"] or 0) + 1}
        self._rows[new_key], self._toasted[new_key] = new, toasted
        self._advance()
        to_new = ((NEW_KEY_HEADER, _header_key(new_key)),)
        to_old = ((OLD_KEY_HEADER, _header_key(old_key)),)
        after, shipped = self._ship(new, toasted)
        return [
            self._record(
                old_key,
                "key-change-delete",
                "d",
                _key_only(old_key),
                None,
                {"op": "d", "before": dict(old), "after": None},
                (),
                to_new,
            ),
            ChangeRecord(
                self._key(old_key), None, self._context + to_new, "key-change-tombstone", None
            ),
            self._record(
                new_key,
                "key-change-create",
                "c",
                None,
                after,
                {"op": "c", "before": None, "after": dict(new)},
                shipped,
                to_old,
            ),
        ]

    def _ship(self, row: Row, unchanged_toasted: set[str]) -> tuple[Row, tuple[str, ...]]:
        """The `after` Debezium ships: unchanged out-of-line values become the placeholder."""
        shipped = tuple(c for c in TOAST_COLUMNS if c in unchanged_toasted)
        after = {c: (self.placeholder_shape(c) if c in shipped else v) for c, v in row.items()}
        return after, shipped

    def _advance(self) -> None:
        if self._started:
            self._last_commit = self._lsn
        self._started = True
        self._lsn += self._rng.randrange(56, 4000, 8)
        self._tx += 1
        self._ts_ms += self._rng.randrange(1, 40)

    def _record(
        self,
        key: int,
        kind: str,
        op: str,
        before: Row | None,
        after: Row | None,
        truth: dict[str, Any],
        placeholders: tuple[str, ...] = (),
        extra_headers: Headers = (),
    ) -> ChangeRecord:
        ts_ms = self._ts_ms
        sequence = orjson.dumps(
            [None if self._last_commit is None else str(self._last_commit), str(self._lsn)]
        ).decode()
        payload = {
            "before": before,
            "after": after,
            "source": {
                "version": "3.6.3.Final",
                "connector": "postgresql",
                "name": self.topic_prefix,
                "ts_ms": ts_ms - 3,
                "snapshot": "false",
                "db": DATABASE,
                "sequence": sequence,
                "ts_us": (ts_ms - 3) * 1000 + 417,
                "ts_ns": ((ts_ms - 3) * 1000 + 417) * 1000,
                "schema": "public",
                "table": TABLE,
                "txId": self._tx,
                "lsn": self._lsn,
                "xmin": None,
                "origin": None,
                "origin_lsn": None,
            },
            "transaction": None,
            "op": op,
            "ts_ms": ts_ms,
            "ts_us": ts_ms * 1000 + 698,
            "ts_ns": (ts_ms * 1000 + 698) * 1000,
        }
        document = {"schema": self._value_schema, "payload": payload} if self.schemas else payload
        return ChangeRecord(
            self._key(key),
            orjson.dumps(document),
            self._context + extra_headers,
            kind,
            truth,
            placeholders,
        )

    def _key(self, key: int) -> bytes:
        if self.schemas:
            return orjson.dumps({"schema": self._key_schema, "payload": {"id": key}})
        return orjson.dumps({"id": key})

    # -- values ------------------------------------------------------------------------------

    def _random_row(self, key: int) -> tuple[Row, set[str]]:
        row: Row = {"id": key, "name": _word(self._rng, 12), "visits": 0}
        toasted: set[str] = set()
        for column in TOAST_COLUMNS:
            row[column], big = self._value(column)
            if big:
                toasted.add(column)
        return row, toasted

    def _value(self, column: str) -> tuple[Any, bool]:
        """A JSON value as Debezium ships `column`, and whether it is stored out of line."""
        rng = self._rng
        size = rng.choices(("big", "small", "null"), weights=(80, 14, 6))[0]
        if size == "null":
            return None, False
        big = size == "big"
        n = self.toast_size if big else 24
        if column == "bio":
            value: Any = _text(rng, n)
        elif column == "profile":
            # Postgres prints jsonb with ", " and ": " separators
            fields = {f"f{i}": _text(rng, 60) for i in range(max(1, n // 70))}
            value = orjson.dumps(fields).decode().replace('","', '", "').replace('":"', '": "')
        elif column == "avatar":
            value = base64.b64encode(rng.randbytes(max(1, n * 3 // 4))).decode()
        elif column == "tags":
            value = [_word(rng, 14) for _ in range(max(1, n // 17))]
        elif column == "scores":
            value = [rng.randrange(-(2**31), 2**31) for _ in range(max(1, n // 11))]
        elif column == "devices":
            value = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(max(1, n // 39))]
        elif column == "prefs":
            value = orjson.dumps({f"k{i}": _word(rng, 20) for i in range(max(1, n // 29))})
            value = value.decode()
        else:  # pragma: no cover - COLUMNS is fixed
            raise ValueError(column)
        return value, big


def _text(rng: random.Random, n: int) -> str:
    # random bytes in base64: nothing for Postgres' compression to shrink
    return base64.b64encode(rng.randbytes(n * 3 // 4 + 3)).decode()[:n]


def _word(rng: random.Random, n: int) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=n))


def _key_only(key: int) -> Row:
    return {name: (key if name == "id" else None) for name, _, _ in COLUMNS}


def _header_key(key: int) -> bytes:
    # SimpleHeaderConverter's rendering of the key Struct: no schema, even with schemas.enable
    return orjson.dumps({"id": key})


def _context_headers(prefix: str, run_id: uuid.UUID) -> Headers:
    return (
        ("__debezium.context.connectorLogicalName", prefix.encode()),
        ("__debezium.context.taskId", b"0"),
        ("__debezium.context.connectorName", b"postgresql"),
        ("__debezium.context.runId", str(run_id).encode()),
    )


def _value_schema(topic: str) -> dict[str, Any]:
    row = [{**schema, "field": name} for name, schema, _ in COLUMNS]

    def image(field: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": row,
            "optional": True,
            "name": f"{topic}.Value",
            "field": field,
        }

    def simple(kind: str, field: str, optional: bool = True) -> dict[str, Any]:
        return {"type": kind, "optional": optional, "field": field}

    source = [
        simple("string", "version", False),
        simple("string", "connector", False),
        simple("string", "name", False),
        simple("int64", "ts_ms", False),
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {
                "allowed": "true,first,first_in_data_collection,"
                "last_in_data_collection,last,false,incremental"
            },
            "default": "false",
            "field": "snapshot",
        },
        simple("string", "db", False),
        simple("string", "sequence"),
        simple("int64", "ts_us"),
        simple("int64", "ts_ns"),
        simple("string", "schema", False),
        simple("string", "table", False),
        simple("int64", "txId"),
        simple("int64", "lsn"),
        simple("int64", "xmin"),
        simple("string", "origin"),
        simple("int64", "origin_lsn"),
    ]
    transaction = [
        simple("string", "id", False),
        simple("int64", "total_order", False),
        simple("int64", "data_collection_order", False),
    ]
    return {
        "type": "struct",
        "fields": [
            image("before"),
            image("after"),
            {
                "type": "struct",
                "fields": source,
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "version": 1,
                "field": "source",
            },
            {
                "type": "struct",
                "fields": transaction,
                "optional": True,
                "name": "event.block",
                "version": 1,
                "field": "transaction",
            },
            simple("string", "op", False),
            simple("int64", "ts_ms"),
            simple("int64", "ts_us"),
            simple("int64", "ts_ns"),
        ],
        "optional": False,
        "name": f"{topic}.Envelope",
        "version": 2,
    }
