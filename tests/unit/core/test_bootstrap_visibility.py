"""Which stream events a bootstrapped image contains (hydrator.core.visibility), and what the
core does with them: contained events go out unfilled and marked, later ones are filled."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydrator.core import HydrationSettings, OnUnresolved, RawRecord
from hydrator.core.visibility import (
    SnapshotFormatError,
    SourceSnapshot,
    contains,
    visible,
    widen_xid,
)
from state.codec import decode_state, encode_state
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step

P = "__debezium_unavailable_value"
EPOCH = 1 << 32


def test_parse_and_print() -> None:
    snapshot = SourceSnapshot.parse("740:745:740,742")
    assert snapshot == SourceSnapshot(740, 745, frozenset({740, 742}))
    assert str(snapshot) == "740:745:740,742"
    assert SourceSnapshot.from_mark(snapshot.to_mark()) == snapshot
    assert SourceSnapshot.parse("10:10:") == SourceSnapshot(10, 10, frozenset())


@pytest.mark.parametrize("text", ["", "1:2", "a:b:", "5:3:", "3:5:7", "0:0:"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(SnapshotFormatError):
        SourceSnapshot.parse(text)


def test_pg_visible_in_snapshot_semantics() -> None:
    snapshot = SourceSnapshot.parse("100:110:103,105")
    assert visible(snapshot, 50)  # long committed
    assert visible(snapshot, 100) and visible(snapshot, 104) and visible(snapshot, 109)
    assert not visible(snapshot, 103) and not visible(snapshot, 105)  # in progress
    assert not visible(snapshot, 110) and not visible(snapshot, 200)  # began after


def test_a_32_bit_txid_is_placed_in_the_snapshot_s_epoch() -> None:
    # epoch 3; Debezium ships the low 32 bits
    snapshot = SourceSnapshot(3 * EPOCH + 100, 3 * EPOCH + 110, frozenset({3 * EPOCH + 103}))
    assert visible(snapshot, 104) and not visible(snapshot, 103) and not visible(snapshot, 111)
    # near a wraparound: the snapshot at the end of epoch 3, an event early in epoch 4
    late = SourceSnapshot(4 * EPOCH - 10, 4 * EPOCH - 5, frozenset())
    assert widen_xid(3, late.xmax) == 4 * EPOCH + 3
    assert not visible(late, 3)
    assert visible(late, EPOCH - 20)
    # the snapshot early in epoch 4, an event committed late in epoch 3
    early = SourceSnapshot(4 * EPOCH + 5, 4 * EPOCH + 8, frozenset())
    assert widen_xid(EPOCH - 3, early.xmax) == 4 * EPOCH - 3
    assert visible(early, EPOCH - 3)


@given(
    st.integers(min_value=3, max_value=(1 << 60)),
    st.integers(min_value=-(1 << 31) + 1, max_value=(1 << 31) - 1),
)
def test_widening_is_the_nearest_full_id(reference: int, offset: int) -> None:
    full = reference + offset
    if full >= 3:
        assert widen_xid(full % EPOCH, reference) == full


@given(
    st.integers(min_value=3, max_value=1 << 40),
    st.integers(min_value=0, max_value=50),
    st.sets(st.integers(min_value=0, max_value=49)),
    st.integers(min_value=-100, max_value=100),
)
def test_visibility_matches_the_definition(
    xmin: int, span: int, running: set[int], offset: int
) -> None:
    xmax = xmin + span
    xip = frozenset(xmin + r for r in running if xmin + r < xmax)
    snapshot = SourceSnapshot(xmin, xmax, xip)
    xid = xmin + offset
    if xid < 3:
        return
    expected = xid < xmin or (xid < xmax and xid not in xip)
    assert visible(snapshot, xid) == expected
    assert visible(snapshot, xid % EPOCH) == expected  # as Debezium ships it


def test_contains_for_topic_rows_and_unknowns() -> None:
    assert contains((), (5, 7), None, (5, 7))
    assert contains((), (5, 7), None, (5, 6))
    assert not contains((), (5, 7), None, (5, 8))
    assert not contains((), (5, 7), None, None)  # no position: cannot tell, applies
    assert not contains((), (5, 7), None, (9,))  # shapes differ
    mark = SourceSnapshot.parse("100:110:103").to_mark()
    assert contains(mark, None, None, (1, 2))  # no txId against a snapshot: never filled
    assert contains(mark, None, 101, None) and not contains(mark, None, 103, None)


# -- the core over a bootstrapped image ---------------------------------------------------------


def _record(op: str, after: dict[str, Any] | None, before: Any, tx: int, lsn: int) -> RawRecord:
    value = {
        "before": before,
        "after": after,
        "op": op,
        "source": {"txId": tx, "lsn": lsn, "sequence": f'["{lsn}","{lsn}"]'},
    }
    return RawRecord("t", 0, lsn, b'{"id":1}', orjson.dumps(value))


IMAGE = {"id": 1, "doc": "D2", "n": 2}
SNAPSHOT = SourceSnapshot.parse("100:110:103")


def _bootstrapped() -> StateRecord:
    return StateRecord(image=dict(IMAGE), bootstrap=SNAPSHOT.to_mark())


def test_a_contained_event_goes_out_unfilled_and_marked() -> None:
    hydrator = debezium_hydrator()
    state = _bootstrapped()
    step = engine_step(hydrator, state, _record("u", {"id": 1, "doc": P, "n": 1}, None, 101, 5), 0)
    assert step.state is state
    (out,) = step.emitted
    headers = dict(out.headers)
    assert headers["hydrator.stale"] == b"bootstrap"
    assert headers["hydrator.unresolved"] == b"doc"
    payload = orjson.loads(out.value)
    assert payload["after"]["doc"] == P and payload["before"] is None
    assert step.counts["bootstrap_older_events"] == 1


def test_a_contained_event_without_placeholders_is_marked_all_the_same() -> None:
    # its `before` would have been filled from a later image: it is not, and says so
    step = engine_step(
        debezium_hydrator(),
        _bootstrapped(),
        _record("u", {"id": 1, "doc": "D1", "n": 1}, None, 50, 5),
        0,
    )
    (out,) = step.emitted
    assert dict(out.headers)["hydrator.stale"] == b"bootstrap"
    assert orjson.loads(out.value)["before"] is None


def test_an_event_after_the_snapshot_is_filled_and_replaces_the_mark() -> None:
    hydrator = debezium_hydrator()
    step = engine_step(
        hydrator, _bootstrapped(), _record("u", {"id": 1, "doc": P, "n": 3}, None, 103, 9), 0
    )
    (out,) = step.emitted
    payload = orjson.loads(out.value)
    assert payload["after"] == {"id": 1, "doc": "D2", "n": 3}
    assert payload["before"] == IMAGE
    assert "hydrator.stale" not in dict(out.headers)
    assert step.state is not None and step.state.bootstrap is None
    assert step.state.pos == (9, 9)
    assert step.counts["bootstrap_applied_events"] == 1
    # from now on the stream rules: a redelivery is stale as ever
    again = engine_step(
        hydrator, step.state, _record("u", {"id": 1, "doc": P, "n": 3}, None, 103, 9), 0
    )
    assert again.emitted == () and again.counts == {"stale_dropped": 1}


def test_a_contained_key_change_hands_off_no_image() -> None:
    hydrator = debezium_hydrator()
    record = _record("d", None, {"id": 1, "doc": None, "n": None}, 101, 5)
    record = RawRecord(
        record.topic, 0, 5, record.key, record.value, (("__debezium.newkey", b'{"id":2}'),)
    )
    step = engine_step(hydrator, _bootstrapped(), record, 0)
    (handoff,) = step.handoffs
    assert handoff.image is None and handoff.new_key == '{"id":2}'


def test_the_mark_survives_the_codec() -> None:
    state = StateRecord(image={"a": 1}, pos=None, bootstrap=SNAPSHOT.to_mark())
    assert decode_state(encode_state(state)) == state
    topic_row = StateRecord(image={"a": 1}, pos=(1, 2), bootstrap=())
    assert decode_state(encode_state(topic_row)) == topic_row
    plain = StateRecord(image={"a": 1}, pos=(1, 2))
    assert encode_state(plain)[1:2] == b"\x98"  # eight fields, as earlier releases wrote


def test_a_before_from_an_image_that_lacks_columns_lists_them() -> None:
    """An update left `doc` unresolved (not stored); a later delete's `before` comes from the
    image, which does not know `doc`: it is listed unresolved, not passed off as complete."""
    hydrator = debezium_hydrator()
    first = engine_step(hydrator, None, _record("u", {"id": 1, "doc": P, "n": 1}, None, 1, 5), 0)
    assert first.state is not None and "doc" not in (first.state.image or {})
    delete = _record("d", None, {"id": 1, "doc": None, "n": None}, 2, 6)
    step = engine_step(hydrator, first.state, delete, 0)
    (out,) = step.emitted
    assert dict(out.headers)["hydrator.unresolved"] == b"doc"
    assert orjson.loads(out.value)["before"] == {"id": 1, "n": 1}
    nulls = debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.NULL))
    (out,) = engine_step(nulls, first.state, delete, 0).emitted
    assert orjson.loads(out.value)["before"] == {"id": 1, "n": 1, "doc": None}
