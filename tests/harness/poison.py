"""Poison records (each one crash-looped an engine once) and events whose integers are wider
than 64 bits (once silently turned into floats), for the engines' end-to-end tests.

A poison record must end in the DLQ with a `hydrator.error` header naming the exception; the
wide events must come out hydrated with every number exactly as it went in.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from tests.harness.cdc_events import OLD_KEY_HEADER, PLACEHOLDER, Record, key_bytes

DEEP = b"[" * 5000
WIDE = 123456789012345678901234567890  # wider than 64 bits


def _event(key: int, lsn: int | str, **extra: object) -> dict[str, object]:
    return {
        "before": None,
        "after": {"id": key, "doc": "d", "n": 0},
        "source": {"connector": "postgresql", "table": "items", "lsn": lsn},
        "op": "c",
        **extra,
    }


def _with_schema(columns: object, after: object) -> bytes:
    schema = {
        "type": "struct",
        "fields": [
            {"field": "before", "type": "struct", "optional": True, "fields": []},
            {"field": "after", "type": "struct", "optional": True, "fields": columns},
        ],
    }
    payload = {"before": None, "after": after, "source": {"lsn": 5}, "op": "c"}
    return orjson.dumps({"schema": schema, "payload": payload})


@dataclass(frozen=True)
class Poison:
    name: str
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    error: str  # the exception type the dead letter's reason starts with


# Keys 9000+ are not used by the good events, so a poison record never meets their state.
POISON = [
    Poison("key nested 5000 deep", DEEP, orjson.dumps(_event(9000, 1)), (), "InvalidKey"),
    Poison(
        "oldkey header nested 5000 deep",
        key_bytes(9001),
        orjson.dumps(_event(9001, 1, after={"id": 9001, "doc": PLACEHOLDER})),
        ((OLD_KEY_HEADER, DEEP),),
        "BadInput",
    ),
    Poison(
        "key with a lone surrogate",
        b'{"id":"\\ud800"}',
        orjson.dumps(_event(0, 1)),
        (),
        "InvalidKey",
    ),
    Poison(
        "schema fields a number",
        key_bytes(9002),
        orjson.dumps({"schema": {"fields": 5}, "payload": _event(9002, 1)}),
        (),
        "TypeError",
    ),
    Poison(
        "schema column name a list",
        key_bytes(9003),
        _with_schema([{"field": ["id"], "type": "int32"}], {"id": 9003}),
        (),
        "TypeError",
    ),
    Poison(
        "schema column name an object",
        key_bytes(9004),
        _with_schema([{"field": {"a": 1}, "type": "int32"}], {"id": 9004}),
        (),
        "TypeError",
    ),
    Poison(
        "schema array items a string",
        key_bytes(9005),
        _with_schema(
            [{"field": "id", "type": "int32"}, {"field": "v", "type": "array", "items": "x"}],
            {"id": 9005, "v": [PLACEHOLDER]},
        ),
        (),
        "AttributeError",
    ),
    Poison(
        "source.lsn of 30 digits",
        key_bytes(9006),
        orjson.dumps(_event(9006, 1)).replace(b'"lsn":1', b'"lsn":' + b"9" * 30),
        (),
        "BadInput",
    ),
    Poison(
        "source.sequence of 30 digits",
        key_bytes(9007),
        orjson.dumps(_event(9007, 1, source={"sequence": f'["{"1" * 30}","{"2" * 30}"]'})),
        (),
        "BadInput",
    ),
]


@dataclass(frozen=True)
class WideRow:
    """A row whose key and columns hold integers wider than 64 bits: an insert, then an update
    that ships the TOASTed `doc` as the placeholder. `expected` are byte fragments the hydrated
    update must hold (compared as bytes: any JSON reader in the test could itself round them)."""

    records: tuple[Record, Record]
    expected: tuple[bytes, ...]


def wide_row(n: int, lsn: int) -> WideRow:
    key = WIDE + n
    key_raw = b'{"id":%d}' % key
    insert = b'{"before":null,"after":{"id":%d,"doc":"doc-%d","n":%d},' % (key, n, -key)
    insert += b'"source":{"connector":"postgresql","lsn":%d},"op":"c"}' % lsn
    update = b'{"before":null,"after":{"id":%d,"doc":"%s","n":%d},' % (
        key,
        PLACEHOLDER.encode(),
        key * 10,
    )
    update += b'"source":{"connector":"postgresql","lsn":%d},"op":"u"}' % (lsn + 1)
    return WideRow(
        ((key_raw, insert, []), (key_raw, update, [])),
        (
            b'"after":{"id":%d,"doc":"doc-%d","n":%d}' % (key, n, key * 10),
            b'"before":{"id":%d,"doc":"doc-%d","n":%d}' % (key, n, -key),
        ),
    )
