"""Hostile Debezium events for fuzzing: real-looking events (keys, values, key-change headers,
schema envelopes) and hypothesis strategies that mutate them into shapes producers should never
write but sometimes do — deep nesting, integers of any width, wrong types, lone surrogates,
NaN/Infinity text, empty and garbage bytes."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from hydrator.core import RawRecord
from tests.support.debezium_model import KEY_SCHEMA, envelope_schema

P = "__debezium_unavailable_value"
TOPIC = "dbserver.public.t"
# `HYDRATOR_FUZZ_EXAMPLES` sets how many events each fuzz test tries (default: a few seconds).
FUZZ = settings(
    max_examples=int(os.environ.get("HYDRATOR_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- real-looking events ------------------------------------------------------------------------


def row(key: int, toasted: bool) -> dict[str, Any]:
    return {
        "id": key,
        "small": 7,
        "txt": P if toasted else "some text",
        "doc": P if toasted else '{"a": 1}',
        "bin": "AAEC",
        "tags": [P] if toasted else ["a", "b"],
        "nums": [1, 2, 3],
        "ids": ["9b2f8f0e-1c1a-3a3a-9a9a-0123456789ab"],
        "attrs": {P: P} if toasted else {"k": "v"},
    }


def key_document(key: int, enveloped: bool) -> Any:
    return {"schema": KEY_SCHEMA, "payload": {"id": key}} if enveloped else {"id": key}


def value_document(op: str, key: int, lsn: int, enveloped: bool, toasted: bool) -> Any:
    before = {"id": key, **dict.fromkeys(list(row(key, False))[1:])} if op in "ud" else None
    payload = {
        "before": before,
        "after": None if op == "d" else row(key, toasted),
        "source": {
            "version": "3.0.0.Final",
            "connector": "postgresql",
            "ts_ms": 1_700_000_000_000,
            "lsn": lsn,
            "sequence": json.dumps([str(lsn - 1), str(lsn)]),
            "txId": 771,
        },
        "op": op,
        "ts_ms": 1_700_000_000_001,
        "transaction": None,
    }
    return {"schema": envelope_schema(), "payload": payload} if enveloped else payload


# -- hostile shapes -----------------------------------------------------------------------------

WIDE_INTEGERS = st.sampled_from([2**64, 2**63, -(2**63) - 1, 10**30, -(10**30), 10**200])
SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
HOSTILE_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | WIDE_INTEGERS
    | st.floats()  # NaN and infinity too
    | st.text(max_size=20)
    | SURROGATES
    | st.sampled_from([P, "u", "c", "d", "t", "fields", "after", "before", "payload"])
)
HOSTILE_VALUES = st.recursive(
    HOSTILE_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
SPLICES = st.sampled_from(
    [
        b"[" * 1000,
        b"{" * 300,
        b"NaN",
        b"-Infinity",
        b'"\\ud800"',
        b"9" * 30,
        b"-" + b"9" * 25,
        b"1e400",
        b"\xff\xfe",
        b"\x00",
        b'"',
        b",",
        b"}",
        b"null",
    ]
)


def replace_at(document: Any, path: list[int], value: Any) -> Any:
    """`document` with the node that `path` picks (child indexes, taken modulo) replaced, or a
    new member added where the path ends in a dict."""
    if not path or not isinstance(document, dict | list) or not document:
        return value
    if isinstance(document, dict):
        names = list(document)
        name = names[path[0] % len(names)] if path[0] % 4 else f"extra{path[0]}"
        copy = dict(document)
        copy[name] = replace_at(document.get(name), path[1:], value)
        return copy
    index = path[0] % len(document)
    return [*document[:index], replace_at(document[index], path[1:], value), *document[index + 1 :]]


def serialize(document: Any, ascii_only: bool) -> bytes:
    """JSON as a careless producer might write it: NaN allowed, lone surrogates escaped or as
    raw (invalid) UTF-8."""
    text = json.dumps(document, ensure_ascii=ascii_only, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> bytes | None:
    """`document` as bytes after a few hostile edits, at the JSON level and at the byte level."""
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.lists(st.integers(0, 50), max_size=5))
        document = replace_at(document, path, draw(HOSTILE_VALUES))
    data = serialize(document, draw(st.booleans()))
    kind = draw(st.sampled_from(["as is", "as is", "splice", "truncate", "garbage", "none"]))
    if kind == "splice":
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, 4))
        data = data[:at] + draw(SPLICES) + data[at + cut :]
    elif kind == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif kind == "garbage":
        data = draw(st.binary(max_size=40))
    elif kind == "none":
        return None
    return data


@st.composite
def hostile_records(draw: st.DrawFn) -> tuple[RawRecord, int]:
    """(a mutated record, its key id before mutation)."""
    op = draw(st.sampled_from("cudr"))
    key = draw(st.integers(1, 3) | WIDE_INTEGERS)
    enveloped = draw(st.booleans())
    value = value_document(op, key, 1000, enveloped, toasted=op == "u" or draw(st.booleans()))
    headers: list[tuple[str, bytes | None]] = []
    if op == "c" and draw(st.booleans()):
        headers.append(("__debezium.oldkey", draw(mutated(key_document(key + 100, enveloped)))))
    if op == "d" and draw(st.booleans()):
        headers.append(("__debezium.newkey", draw(mutated(key_document(key + 200, enveloped)))))
    if draw(st.booleans()):
        headers.append(("trace", draw(st.binary(max_size=8))))
    key_bytes = draw(mutated(key_document(key, enveloped)))
    value_bytes = draw(mutated(value))
    offset = draw(st.integers(0, 10))
    return RawRecord(TOPIC, 0, offset, key_bytes, value_bytes, tuple(headers)), key


def good_record(key: int, op: str, lsn: int, headers: tuple = ()) -> RawRecord:
    value = serialize(value_document(op, key, lsn, False, toasted=op == "u"), True)
    return RawRecord(TOPIC, 0, lsn, serialize(key_document(key, False), True), value, headers)
