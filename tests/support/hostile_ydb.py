"""Hostile YDB changefeed records for fuzzing: real-looking change records, barriers and schema
changes (tests/support/ydb_model.py spells their values), mutated by the same hostile edits as
the Debezium events (tests/support/hostile_events.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from hydrator.core import RawRecord
from tests.support.hostile_events import WIDE_INTEGERS, mutated

TOPIC = "ydb.shop.orders.feed"


def row() -> dict[str, Any]:
    return {
        "name": "Zürich €",
        "amount": 2**64 - 1,
        "balance": "12345678901234567890.1234567890",
        "meta": {"n": 10**30, "tags": ["a", None]},
        "blob": "AAEC",
        "flag": None,
    }


def change_document(operation: str, key: int, mode: str, ts: bool) -> dict[str, Any]:
    document: dict[str, Any] = {"key": [key, "eu"]}
    if mode in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
        document["oldImage"] = row()
    if mode in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and operation != "erase":
        document["newImage"] = row()
    columns = row() if mode == "UPDATES" and operation != "erase" else {}
    document[operation] = columns
    if ts:
        document["ts"] = [1_700_000_000_000, 562_949_953_421_312]
    return document


@st.composite
def hostile_ydb_records(draw: st.DrawFn) -> RawRecord:
    kind = draw(st.sampled_from(["update", "reset", "erase", "update", "resolved", "schema"]))
    key = draw(st.integers(0, 3) | WIDE_INTEGERS)
    if kind == "resolved":
        document: Any = {"resolved": [1_700_000_000_000, 562_949_953_421_312]}
    elif kind == "schema":
        document = {"tableChanges": [{"table": {"schemaVersion": 2}}], "ts": [1, 2]}
    else:
        mode = draw(st.sampled_from(["UPDATES", "NEW_IMAGE", "NEW_AND_OLD_IMAGES", "OLD_IMAGE"]))
        document = change_document(kind, key, mode, draw(st.booleans()))
    kafka_key = draw(st.none() | st.binary(max_size=12))  # YDB's is null; others are ignored
    return RawRecord(TOPIC, 0, draw(st.integers(0, 10)), kafka_key, draw(mutated(document)))


def good_ydb_record(key: int, offset: int) -> RawRecord:
    value = b'{"key":[%d,"eu"],"update":{"name":"x","amount":1}}' % key
    return RawRecord(TOPIC, 0, offset, None, value)
