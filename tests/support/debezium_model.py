"""A model of how Debezium's Postgres connector renders a row history (docs/formats.md).

Each change is rendered twice: as the default replica identity ships it (placeholders for
unchanged TOASTed columns, `before` null on updates and key-only on deletes) and as a
`REPLICA IDENTITY FULL` table ships it (full images). Hydrating the first must give the second.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from hydrator.events import RawRecord
from hydrator.formats.placeholders import PlaceholderForms

# column -> (Kafka Connect field schema, toastable)
COLUMNS: dict[str, tuple[dict[str, Any], bool]] = {
    "id": ({"type": "int32", "optional": False, "field": "id"}, False),
    "small": ({"type": "int32", "optional": True, "field": "small"}, False),
    "txt": ({"type": "string", "optional": True, "field": "txt"}, True),
    "doc": (
        {"type": "string", "optional": True, "name": "io.debezium.data.Json", "field": "doc"},
        True,
    ),
    "bin": ({"type": "bytes", "optional": True, "field": "bin"}, True),
    "tags": (
        {"type": "array", "optional": True, "items": {"type": "string"}, "field": "tags"},
        True,
    ),
    "nums": (
        {"type": "array", "optional": True, "items": {"type": "int64"}, "field": "nums"},
        True,
    ),
    "ids": (
        {
            "type": "array",
            "optional": True,
            "items": {"type": "string", "name": "io.debezium.data.Uuid"},
            "field": "ids",
        },
        True,
    ),
    "attrs": (
        {
            "type": "map",
            "optional": True,
            "keys": {"type": "string"},
            "values": {"type": "string", "optional": True},
            "field": "attrs",
        },
        True,
    ),
}
TOASTABLE = tuple(name for name, (_, toastable) in COLUMNS.items() if toastable)


def placeholder_for(column: str, forms: PlaceholderForms) -> Any:
    return {
        "txt": forms.text,
        "doc": forms.text,
        "bin": forms.base64,
        "tags": [forms.text],
        "nums": forms.byte_ints,
        "ids": [forms.uuid],
        "attrs": forms.hstore_map,
    }[column]


def envelope_schema() -> dict[str, Any]:
    row = [schema for schema, _ in COLUMNS.values()]
    image = {"type": "struct", "optional": True, "fields": row}
    return {
        "type": "struct",
        "name": "dbserver.public.t.Envelope",
        "fields": [
            {**image, "field": "before", "name": "dbserver.public.t.Value"},
            {**image, "field": "after", "name": "dbserver.public.t.Value"},
            {"type": "struct", "field": "source", "optional": False, "fields": []},
            {"type": "string", "field": "op", "optional": False},
        ],
    }


KEY_SCHEMA = {
    "type": "struct",
    "name": "dbserver.public.t.Key",
    "optional": False,
    "fields": [{"type": "int32", "optional": False, "field": "id"}],
}


@dataclass
class Rendered:
    """One change event in both identities; `expected` is None for events hydration must drop."""

    default: RawRecord
    full_value: dict[str, Any] | None
    key_id: int
    duplicate: bool = False


@dataclass
class DebeziumModel:
    forms: PlaceholderForms
    with_schema: bool = False
    topic: str = "dbserver.public.t"
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    lsn: int = 1000
    last_commit: int = 0
    offset: int = 0
    log: list[Rendered] = field(default_factory=list)

    # -- table operations ----------------------------------------------------------------------

    def insert(self, row: dict[str, Any]) -> None:
        self.rows[row["id"]] = row
        self._emit(row["id"], "c", None, row, None, row)

    def update(self, key: int, changes: dict[str, Any]) -> None:
        old = self.rows[key]
        new = {**old, **changes}
        self.rows[key] = new
        shipped = self._with_placeholders(new, unchanged={c for c in TOASTABLE if c not in changes})
        self._emit(key, "u", None, shipped, old, new)

    def delete(self, key: int) -> None:
        old = self.rows.pop(key)
        self._emit(key, "d", self._key_only(old), None, old, None)
        self._tombstone(key)

    def change_key(self, key: int, new_key: int, changes: dict[str, Any]) -> None:
        """UPDATE ... SET id = new_key: DELETE(old) + tombstone + CREATE(new), one WAL record."""
        old = self.rows.pop(key)
        new = {**old, **changes, "id": new_key}
        self.rows[new_key] = new
        lsn = self._next_lsn()
        self._emit(
            key,
            "d",
            self._key_only(old),
            None,
            old,
            None,
            lsn=lsn,
            headers=(("__debezium.newkey", self._key_json(new_key)),),
        )
        self._tombstone(key, headers=(("__debezium.newkey", self._key_json(new_key)),))
        unchanged = {c for c in TOASTABLE if c not in changes}
        self._emit(
            new_key,
            "c",
            None,
            self._with_placeholders(new, unchanged),
            None,
            new,
            lsn=lsn,
            headers=(("__debezium.oldkey", self._key_json(key)),),
        )

    def redeliver(self, count: int) -> None:
        """A connector restart: the last `count` records arrive again, in order."""
        for rendered in self.log[-count:] if count else []:
            original = rendered.default
            self.offset += 1
            again = RawRecord(
                original.topic,
                original.partition,
                self.offset,
                original.key,
                original.value,
                original.headers,
            )
            self.log.append(Rendered(again, rendered.full_value, rendered.key_id, duplicate=True))

    # -- rendering -----------------------------------------------------------------------------

    def _with_placeholders(self, row: dict[str, Any], unchanged: set[str]) -> dict[str, Any]:
        return {
            c: placeholder_for(c, self.forms) if c in unchanged and row[c] is not None else v
            for c, v in row.items()
        }

    @staticmethod
    def _key_only(row: dict[str, Any]) -> dict[str, Any]:
        return {c: (v if c == "id" else None) for c, v in row.items()}

    def _key_json(self, key: int) -> bytes:
        return orjson.dumps({"id": key})

    def _record_key(self, key: int) -> bytes:
        if self.with_schema:
            return orjson.dumps({"schema": KEY_SCHEMA, "payload": {"id": key}})
        return orjson.dumps({"id": key})

    def _next_lsn(self) -> int:
        self.last_commit, self.lsn = self.lsn, self.lsn + 8
        return self.lsn

    def _emit(
        self,
        key: int,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        full_before: dict[str, Any] | None,
        full_after: dict[str, Any] | None,
        lsn: int | None = None,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        lsn = lsn if lsn is not None else self._next_lsn()
        source = {
            "connector": "postgresql",
            "lsn": lsn,
            "sequence": orjson.dumps([str(self.last_commit), str(lsn)]).decode(),
        }
        default = {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1}
        full = {
            "before": full_before if op != "c" else None,
            "after": full_after,
            "source": source,
            "op": op,
            "ts_ms": 1,
        }
        self.offset += 1
        record = RawRecord(
            self.topic,
            0,
            self.offset,
            self._record_key(key),
            orjson.dumps(self._wrap(default)),
            headers,
        )
        self.log.append(Rendered(record, full, key))

    def _tombstone(self, key: int, headers: tuple[tuple[str, bytes], ...] = ()) -> None:
        self.offset += 1
        record = RawRecord(self.topic, 0, self.offset, self._record_key(key), None, headers)
        self.log.append(Rendered(record, None, key))

    def _wrap(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"schema": envelope_schema(), "payload": payload} if self.with_schema else payload


def payload_of(value: bytes) -> dict[str, Any]:
    document = orjson.loads(value)
    return document["payload"] if "schema" in document and "payload" in document else document


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
