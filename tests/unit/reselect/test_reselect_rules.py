"""The pure side of the re-select fallback (docs/cold-start.md, "Re-select fallback"): which
re-selected values count as exact, how the core fills with them, what the state keeps, the
Debezium spelling of Postgres values, and what a miss names."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from hydrator.core import HydrationSettings, OnUnresolved, RawRecord
from hydrator.core.records import HEADER_FILLED, HEADER_UNRESOLVED
from hydrator.core.reselected import (
    HEADER_RESELECTED,
    HEADER_RESELECTED_CURRENT,
    Reselected,
    ReselectedRow,
    reselected_for,
    same_transaction,
)
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.postgres.debezium_values import (
    PgColumn,
    encode_row,
    java_hashmap_order,
    select_expression,
    shipped_encoder,
)
from hydrator.reselect.misses import miss_of, placeholder_patterns
from hydrator.reselect.settings import ReselectSettings
from tests.support.core import debezium_hydrator

P = "__debezium_unavailable_value"
FORMS = PlaceholderForms(P.encode())


# -- exact or current --------------------------------------------------------------------------


def test_exact_only_for_the_events_own_transaction() -> None:
    row = ReselectedRow({"doc": "x", "body": "y"}, xmin=1234)
    exact = reselected_for(row, ("doc",), tx_id=1234)
    assert exact == Reselected({"doc": "x"}, frozenset({"doc"}))
    current = reselected_for(row, ("doc",), tx_id=1000)
    assert current == Reselected({"doc": "x"}, frozenset())
    assert reselected_for(row, ("doc",), tx_id=1234, rewritten_in_batch=True).exact == set()
    assert reselected_for(row, ("doc",), tx_id=None).exact == set()
    assert reselected_for(None, ("doc",), tx_id=1234) is None  # the row is gone
    assert reselected_for(row, ("other",), tx_id=1234) is None


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**31))
def test_txids_compare_as_32_bit_xids_whatever_the_epoch(xid: int, epoch: int) -> None:
    assert same_transaction(xid, (epoch << 32) | xid)
    assert not same_transaction(xid, (epoch << 32) | ((xid + 1) % 2**32))


# -- the core fills with them ------------------------------------------------------------------


def record(op: str, after: dict[str, Any], lsn: int, offset: int, tx: int = 7) -> RawRecord:
    source = {"lsn": lsn, "txId": tx, "schema": "public", "table": "t"}
    value = {"op": op, "before": None, "after": after, "source": source, "ts_ms": 1}
    return RawRecord("t", 0, offset, orjson.dumps({"id": 1}), orjson.dumps(value))


def headers(step: Any) -> dict[str, str]:
    (out,) = step.emitted
    return {k: (v or b"").decode() for k, v in out.headers}


def test_exact_values_fill_and_seed_the_state_current_ones_only_fill() -> None:
    hydrator = debezium_hydrator()
    event = record("u", {"id": 1, "small": 2, "doc": P, "body": P}, 10, 1)
    supplement = Reselected({"doc": "D", "body": "B"}, frozenset({"doc"}))
    step = hydrator.process(None, event, '{"id":1}', 0, supplement)
    got = headers(step)
    assert got[HEADER_RESELECTED] == "doc"
    assert got[HEADER_RESELECTED_CURRENT] == "body"
    assert HEADER_UNRESOLVED not in got and HEADER_FILLED not in got
    after = orjson.loads(step.emitted[0].value)["after"]
    assert after == {"id": 1, "small": 2, "doc": "D", "body": "B"}
    assert step.state is not None and step.state.image == {"id": 1, "small": 2, "doc": "D"}
    assert step.counts["reselected_columns_exact"] == 1
    assert step.counts["reselected_columns_current"] == 1

    # the next event fills doc from the state (filled), and body is still unknown
    later = hydrator.process(
        step.state, record("u", {"id": 1, "small": 3, "doc": P, "body": P}, 20, 2), '{"id":1}', 0
    )
    got = headers(later)
    assert got[HEADER_FILLED] == "doc" and got[HEADER_UNRESOLVED] == "body"


def test_the_state_comes_first_and_a_missing_row_leaves_the_column_to_on_unresolved() -> None:
    hydrator = debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.NULL))
    first = hydrator.process(None, record("c", {"id": 1, "doc": "S"}, 10, 1), '{"id":1}', 0)
    supplement = Reselected({"doc": "newer"}, frozenset({"doc"}))
    step = hydrator.process(
        first.state, record("u", {"id": 1, "doc": P}, 20, 2), '{"id":1}', 0, supplement
    )
    assert orjson.loads(step.emitted[0].value)["after"]["doc"] == "S"
    assert HEADER_RESELECTED not in headers(step)
    step = hydrator.process(
        None, record("u", {"id": 1, "doc": P}, 20, 2), '{"id":1}', 0, Reselected({})
    )
    assert orjson.loads(step.emitted[0].value)["after"]["doc"] is None


# -- Debezium's spelling of Postgres values ----------------------------------------------------


UNSUPPORTED = object()


def encode(column: PgColumn, raw: Any, shipped: Any) -> Any:
    """`raw` (as `select_expression`'s SQL reads it) encoded for the placeholder `shipped`;
    UNSUPPORTED when the pair is not one the re-select knows."""
    encoder = shipped_encoder(column, shipped, FORMS)
    return UNSUPPORTED if encoder is None else encoder(raw)


def test_values_are_spelled_as_the_placeholder_says_the_connector_ships_them() -> None:
    data = b"\x00\xffhello"
    bytea = PgColumn("b", "bytea")
    assert encode(bytea, data, FORMS.base64) == base64.b64encode(data).decode()
    assert encode(bytea, data, P) == data.hex()
    ints = PgColumn("n", "int4", is_array=True)
    assert encode(ints, ["1", None, "3"], FORMS.byte_ints) == [1, None, 3]
    uuids = PgColumn("u", "uuid", is_array=True)
    u = "b68a35a7-17ad-35b3-af2a-ae46edb4545a"
    assert encode(uuids, [u], [FORMS.uuid]) == [u]
    texts = PgColumn("t", "text", is_array=True)
    assert encode(texts, ["a", "b"], [P]) == ["a", "b"]
    text = PgColumn("x", "jsonb")
    assert encode(text, '{"a": 1}', P) == '{"a": 1}'
    hstore = PgColumn("h", "hstore")
    assert encode(hstore, '"k"=>"v", "a"=>NULL', FORMS.hstore_map) == {"k": "v", "a": None}
    assert encode(hstore, '"k"=>"v"', FORMS.hstore_json) == '{"k":"v"}'
    assert encode(ints, ["1"], [P]) is UNSUPPORTED  # a shape this column never has
    assert encode(PgColumn("d", "date"), "2022-01-08", FORMS.byte_ints) is UNSUPPORTED
    columns = {"x": text, "d": PgColumn("d", "date")}
    read = {"x": None, "d": "2022-01-08"}
    # NULL stays null; a column whose placeholder is not one this module knows is left out
    assert encode_row(columns, read, {"x": P, "d": FORMS.byte_ints}, FORMS) == {"x": None}


def test_sql_reads_each_type_in_the_shape_the_encoder_takes() -> None:
    assert select_expression(PgColumn("b", "bytea"), '"b"') == '"b"'
    assert select_expression(PgColumn("h", "hstore"), '"h"') == '"h"::text'
    assert select_expression(PgColumn("n", "int8", is_array=True), '"n"') == '"n"::text[]'
    assert select_expression(PgColumn("t", "jsonb", is_array=True), '"t"') == '"t"::text[]'
    assert select_expression(PgColumn("j", "jsonb"), '"j"') == '"j"::text'


def test_java_hashmap_order() -> None:
    # java.util.HashMap: "b" (hash 98) before "a"? No: bucket 97 & 15 = 1, 98 & 15 = 2
    assert java_hashmap_order(["b", "a"]) == ["a", "b"]
    # 13 keys grow the table to 32 buckets; "key0".."key12" then sort by (hash ^ hash>>>16) & 31
    keys = [f"key{i}" for i in range(13)]
    order = java_hashmap_order(keys)
    assert sorted(order) == sorted(keys)

    def bucket(key: str) -> int:
        h = 0
        for ch in key:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 31

    assert [bucket(k) for k in order] == sorted(bucket(k) for k in order)


# -- what a miss names -------------------------------------------------------------------------


def test_a_miss_names_table_key_transaction_and_placeholders() -> None:
    value = {
        "schema": {"type": "struct"},
        "payload": {
            "op": "u",
            "after": {"id": 5, "doc": P},
            "source": {"schema": "s", "table": "t", "txId": 99},
        },
    }
    raw = RawRecord("x", 0, 3, b'{"schema":{},"payload":{"id":5}}', orjson.dumps(value))
    miss = miss_of(raw, '{"id":5}', ("doc",))
    assert miss is not None
    assert (miss.schema, miss.table, miss.key_columns, miss.key) == ("s", "t", ("id",), (5,))
    assert miss.tx_id == 99 and miss.shipped == {"doc": P} and miss.source == "x:0:3"
    no_table = {"op": "u", "after": {"id": 5, "doc": P}, "source": {"txId": 1}}
    assert miss_of(RawRecord("x", 0, 3, b'{"id":5}', orjson.dumps(no_table)), "k", ("doc",)) is None
    assert miss_of(RawRecord("x", 0, 3, None, orjson.dumps(value)), "k", ("doc",)) is None
    other = {
        **value["payload"],
        "source": {"connector": "sqlserver", "schema": "dbo", "table": "t"},
    }
    assert miss_of(RawRecord("x", 0, 3, b'{"id":5}', orjson.dumps(other)), "k", ("doc",)) is None


def test_a_miss_asks_only_for_the_placeholders_of_after() -> None:
    """An unresolved column whose value `after` ships (only a `before` taken from the state
    lacked it) is not re-selected: reading it would say nothing of the `before`."""
    value = {
        "op": "u",
        "after": {"id": 5, "doc": P, "txt": "shipped"},
        "source": {"schema": "s", "table": "t", "txId": 99},
    }
    raw = RawRecord("x", 0, 3, b'{"id":5}', orjson.dumps(value))
    miss = miss_of(raw, '{"id":5}', ("doc", "txt"), FORMS)
    assert miss is not None and miss.shipped == {"doc": P}
    assert miss_of(raw, '{"id":5}', ("txt",), FORMS) is None


def test_placeholder_patterns_find_every_spelling() -> None:
    patterns = placeholder_patterns(FORMS)
    for spelled in (P, FORMS.base64, FORMS.uuid, FORMS.hstore_json, FORMS.byte_ints, [P]):
        value = orjson.dumps({"after": {"c": spelled}})
        assert any(p in value for p in patterns), spelled
    assert not any(p in b'{"after":{"c":"plain"}}' for p in patterns)


def test_the_dsn_password_is_a_secret_and_never_in_the_target() -> None:
    settings = ReselectSettings("postgresql://app:hunter22@db.example:5433/shop")
    assert settings.target() == "db.example:5433/shop"
    assert "hunter22" in settings.secrets()
    assert "hunter22" not in repr(settings)
    keyword = ReselectSettings("host=db dbname=shop user=app password=hunter22")
    assert keyword.secrets() == {"hunter22"} and "hunter22" not in keyword.target()
