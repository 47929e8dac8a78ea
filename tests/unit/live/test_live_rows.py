"""The live view's model of the enriched topic: one row per key, abbreviated values, the
columns the hydrator filled."""

from __future__ import annotations

import orjson
import pytest

from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.events import BadInput, RawRecord
from hydrator.formats import codec_for
from hydrator.live.rows import LatestRows, display, row_change
from tests.harness.cdc_events import PLACEHOLDER, envelope, key_bytes

CODEC = codec_for("auto")


def record(key: int, value: bytes | None, headers=(), offset: int = 0) -> RawRecord:
    return RawRecord("t.enriched", 0, offset, key_bytes(key), value, tuple(headers))


def test_a_hydrated_update_shows_its_filled_column_abbreviated() -> None:
    doc = "x" * 500
    value = envelope("u", None, {"id": 1, "doc": doc, "n": 2, "tags": ["a"]}, 7, "t")
    headers = [(HEADER_FILLED, b"doc"), (HEADER_SOURCE, b"t:0:41")]
    change = row_change(record(1, value, headers), CODEC, preview_chars=20)
    assert change is not None
    message = change.message()
    assert message == {
        "kind": "row",
        "key": '{"id":1}',
        "op": "u",
        "columns": {"id": "1", "doc": "x" * 20 + "…", "n": "2", "tags": '["a"]'},
        "lengths": {"doc": 500},
        "filled": ["doc"],
        "unresolved": [],
        "source": "t:0:41",
    }


def test_unresolved_columns_are_marked_from_the_header_and_the_placeholder() -> None:
    value = envelope("u", None, {"id": 1, "doc": PLACEHOLDER, "bio": None}, 7, "t")
    change = row_change(record(1, value, [(HEADER_UNRESOLVED, b"doc")]), CODEC, 160)
    assert change is not None and change.unresolved == ("doc",)
    assert change.columns == {"id": "1", "doc": PLACEHOLDER, "bio": None}


def test_deletes_tombstones_and_bad_records() -> None:
    delete = envelope("d", {"id": 3, "doc": None}, None, 9, "t")
    change = row_change(record(3, delete, offset=5), CODEC, 160)
    assert change is not None
    assert change.message() == {
        "kind": "delete",
        "key": '{"id":3}',
        "op": "d",
        "source": "t.enriched:0:5",
    }
    assert row_change(record(3, None), CODEC, 160) is None  # a Kafka tombstone changes no row
    with pytest.raises(BadInput):
        row_change(record(3, b"not json"), CODEC, 160)


def test_latest_rows_keeps_the_most_recently_changed_keys() -> None:
    latest = LatestRows(capacity=2)

    def upsert(key: int, n: int) -> None:
        value = envelope("u", None, {"id": key, "n": n}, n, "t")
        change = row_change(record(key, value), CODEC, 160)
        assert change is not None
        latest.apply(change)

    upsert(1, 1)
    upsert(2, 2)
    upsert(1, 3)  # key 1 becomes the most recent
    upsert(3, 4)  # over capacity: key 2, the least recently changed, goes
    rows = latest.snapshot()["rows"]
    assert [(r["key"], r["columns"]["n"]) for r in rows] == [('{"id":1}', "3"), ('{"id":3}', "4")]
    delete = row_change(record(1, envelope("d", {"id": 1}, None, 5, "t")), CODEC, 160)
    assert delete is not None
    assert latest.apply(delete)["kind"] == "delete"
    assert [r["key"] for r in latest.snapshot()["rows"]] == ['{"id":3}']


def test_display_keeps_numbers_exact() -> None:
    assert display(2**70) == str(2**70)
    assert display({"a": [1, None]}) == orjson.dumps({"a": [1, None]}).decode()
    assert display(None) is None
