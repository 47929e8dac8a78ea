"""What a bootstrap writes over the state already there (hydrator.seeding.images), and the
Debezium spellings of Postgres values it depends on (hydrator.postgres.debezium_values)."""

from __future__ import annotations

import base64
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from hydrator.core.visibility import SourceSnapshot
from hydrator.events import ChangeEvent, Op
from hydrator.postgres.debezium_values import (
    ConnectorSettings,
    PgColumn,
    encoder,
    java_hashmap_order,
    java_string_hash,
    parse_hstore,
)
from hydrator.seeding import images
from state.handoff import Handoff
from state.record import StateRecord

SNAPSHOT = SourceSnapshot.parse("10:20:12")


def _row(image: dict) -> StateRecord:
    return images.snapshot_row(image, SNAPSHOT, 0)


def test_an_empty_key_takes_the_bootstrap_row() -> None:
    row = _row({"id": 1})
    assert images.merged(None, row) is row


def test_the_stream_s_state_is_never_replaced() -> None:
    streamed = StateRecord(image={"id": 1, "a": "old"}, pos=(1, 1))
    assert images.merged(streamed, _row({"id": 1, "a": "new"})) is None
    tombstone = StateRecord(None, (1, 2), deleted=True)
    assert images.merged(tombstone, _row({"id": 1})) is None
    waiting = StateRecord(
        image={"id": 1},
        bootstrap=SNAPSHOT.to_mark(),
        handoffs=(Handoff("t", "k", "o", None, None, "s"),),
    )
    assert images.merged(waiting, _row({"id": 1, "a": 2})) is None


def test_the_same_row_again_writes_nothing_a_changed_one_replaces() -> None:
    first = _row({"id": 1, "a": 1})
    later = images.snapshot_row({"id": 1, "a": 1}, SourceSnapshot.parse("30:31:"), 5)
    assert images.merged(first, later) is None
    changed = images.snapshot_row({"id": 1, "a": 2}, SourceSnapshot.parse("30:31:"), 5)
    assert images.merged(first, changed) is changed


def _event(
    op: Op, after: dict | None, pos: tuple[int, int], missing: tuple[str, ...] = ()
) -> ChangeEvent:
    return ChangeEvent(op, None, after, missing_after=missing, position=pos)


def test_a_topic_of_rows_folds_by_position() -> None:
    state = images.fold_full_row(None, _event(Op.CREATE, {"id": 1, "a": 1, "b": "x"}, (1, 1)), 0)
    state = images.fold_full_row(
        state, _event(Op.UPDATE, {"id": 1, "a": 2, "b": "P"}, (2, 2), ("b",)), 0
    )
    assert state is not None and state.image == {"id": 1, "a": 2, "b": "x"}
    assert state.pos == (2, 2) and state.bootstrap == ()
    # an older record changes nothing
    assert (
        images.fold_full_row(state, _event(Op.UPDATE, {"id": 1, "a": 0, "b": "y"}, (1, 5)), 0)
        is state
    )
    gone = images.fold_full_row(state, ChangeEvent(Op.DELETE, {"id": 1}, None, position=(3, 3)), 0)
    assert gone is not None and gone.deleted and gone.image is None
    # topic rows against topic rows: the later position wins, an equal one writes nothing
    assert images.merged(state, state) is None
    assert images.merged(state, gone) is gone
    assert images.merged(gone, state) is None


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=12))
def test_bootstrapping_twice_is_bootstrapping_once(values: list[int]) -> None:
    """A rerun after a failure halfway: whatever was written, writing all again ends the same."""
    rows = {i: _row({"id": i, "v": v}) for i, v in enumerate(values)}
    store: dict[int, StateRecord] = {}
    for i, row in list(rows.items())[: len(rows) // 2]:  # the first run stopped halfway
        store[i] = images.merged(store.get(i), row) or store[i]
    for i, row in rows.items():
        chosen = images.merged(store.get(i), row)
        if chosen is not None:
            store[i] = chosen
    assert {i: s.image for i, s in store.items()} == {i: r.image for i, r in rows.items()}
    assert all(images.merged(store[i], rows[i]) is None for i in rows)


def test_decimals_as_kafka_connect_writes_them() -> None:
    precise = encoder(PgColumn("n", "numeric", precision=12, scale=3), ConnectorSettings())
    assert base64.b64decode(precise("-12345.678")) == (-12345678).to_bytes(4, "big", signed=True)
    assert precise("0") == "AA=="
    assert base64.b64decode(precise("128.000")) == (128000).to_bytes(3, "big", signed=True)
    variable = encoder(PgColumn("n", "numeric"), ConnectorSettings())
    assert variable("3.14159000") == {
        "scale": 5,
        "value": base64.b64encode((314159).to_bytes(3, "big")).decode(),
    }
    assert variable("100")["scale"] == 0


@given(
    st.decimals(
        allow_nan=False, allow_infinity=False, places=3, min_value=-(10**9), max_value=10**9
    )
)
def test_precise_decimals_round_trip(number: Decimal) -> None:
    encode = encoder(PgColumn("n", "numeric", precision=15, scale=3), ConnectorSettings())
    unscaled = int.from_bytes(base64.b64decode(encode(str(number))), "big", signed=True)
    assert Decimal(unscaled).scaleb(-3) == number


def test_hstore_in_java_hashmap_order() -> None:
    pairs = parse_hstore('"a"=>"1", "k 2"=>NULL, "q\\"x"=>"y\\\\z"')
    assert pairs == [("a", "1"), ("k 2", None), ('q"x', "y\\z")]
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == (-(2**31)) & 0xFFFFFFFF
    keys = [f"key{i}" for i in range(30)]
    assert sorted(java_hashmap_order(keys)) == sorted(keys)
