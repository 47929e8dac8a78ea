"""Header `hydrator.changed`: the columns whose value differs from the key's previous full image
(docs/cold-start.md, "Changed columns"), computed from state for every format."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator import exact
from hydrator.core import HydrationSettings, Hydrator, RawRecord, Transition
from hydrator.core.changes import HEADER_CHANGED, changed_columns, same_value
from hydrator.events import ChangeEvent, Op, Patch
from hydrator.formats import FormatOptions, codec_for
from hydrator.formats.placeholders import PlaceholderForms
from state.large import DEFAULT_THRESHOLD, NOT_AT_HAND, LazyImage, large_cells
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step
from tests.support.debezium_model import DebeziumModel
from tests.unit.core.test_hydration_properties import PLACEHOLDERS, build_history

P = "__debezium_unavailable_value"


def changed_of(step: Transition) -> list[str] | None:
    """The header of the step's one output: its columns, None when absent."""
    (out,) = step.emitted
    value = dict(out.headers).get(HEADER_CHANGED)
    return None if value is None else [c for c in value.decode().split(",") if c]


class Feed:
    """Records of one format through the core, state carried per key."""

    def __init__(self, fmt: str, settings: HydrationSettings | None = None) -> None:
        self.hydrator = Hydrator(codec_for(fmt), settings)
        self.states: dict[str | None, StateRecord | None] = {}
        self.offset = 0

    def step(self, value: Any, key: Any = None) -> Transition:
        self.offset += 1
        raw_key = None if key is None else orjson.dumps(key)
        record = RawRecord("t", 0, self.offset, raw_key, exact.dumps(value))
        route = self.hydrator.route(record)
        assert isinstance(route, str | None), route
        step = engine_step(self.hydrator, self.states.get(route), record, 0)
        if route is not None:
            self.states[route] = step.state
        return step


def dbz(op: str, before: Any, after: Any, lsn: int) -> dict[str, Any]:
    source = {"lsn": lsn, "sequence": f'["{lsn - 1}","{lsn}"]'}
    return {"op": op, "before": before, "after": after, "source": source, "ts_ms": 1}


# -- Debezium ----------------------------------------------------------------------------------


def test_a_create_lists_every_column_and_an_update_the_ones_it_changed() -> None:
    feed = Feed("debezium")
    key = {"id": 1}
    row = {"id": 1, "a": 1, "b": "x", "doc": "big"}
    assert changed_of(feed.step(dbz("c", None, row, 10), key)) == ["id", "a", "b", "doc"]
    # placeholder for doc, a written with its old value, b changed
    update = {"id": 1, "a": 1, "b": "y", "doc": P}
    assert changed_of(feed.step(dbz("u", None, update, 20), key)) == ["b"]
    # nothing changed: the header is there, empty
    assert changed_of(feed.step(dbz("u", None, update, 30), key)) == []


def test_a_delete_carries_the_header_empty_and_a_snapshot_read_lists_everything() -> None:
    feed = Feed("debezium")
    key = {"id": 1}
    row = {"id": 1, "a": 1}
    feed.step(dbz("c", None, row, 10), key)
    assert changed_of(feed.step(dbz("r", None, row, 20), key)) == ["id", "a"]
    assert changed_of(feed.step(dbz("d", {"id": 1, "a": None}, None, 30), key)) == []


def test_without_a_stored_row_a_full_before_tells_and_otherwise_every_known_column() -> None:
    feed = Feed("debezium")
    full_before = {"id": 1, "a": 1, "b": "x"}
    step = feed.step(dbz("u", full_before, {"id": 1, "a": 2, "b": "x"}, 10), {"id": 1})
    assert changed_of(step) == ["a"]
    # no image, null before, a placeholder nothing can fill: the unresolved column is not listed
    step = feed.step(dbz("u", None, {"id": 2, "a": 2, "doc": P}, 10), {"id": 2})
    assert changed_of(step) == ["id", "a"]


def test_no_changed_header_turns_it_off() -> None:
    feed = Feed("debezium", HydrationSettings(changed_header=False))
    assert changed_of(feed.step(dbz("c", None, {"id": 1}, 10), {"id": 1})) is None


def test_a_stored_large_value_is_compared_by_digest_without_reading_it() -> None:
    big, other = "x" * 5000, "y" * 5000
    cells = {"id": 1, "doc": big}
    refs = large_cells(cells, DEFAULT_THRESHOLD, None)
    assert refs is not None

    class Unreadable:
        def read(self, ref: Any) -> Any:
            raise AssertionError("read a large value")

        def peek(self, ref: Any) -> Any:
            return NOT_AT_HAND

    stored = LazyImage({**cells, **{c: r.out_of_line() for c, r in refs.items()}}, Unreadable())
    for shipped, expected in ((big, ()), (other, ("doc",))):
        event = ChangeEvent(Op.UPDATE, None, {"id": 1, "doc": shipped})
        patch = Patch(old_image=stored, new_image={"id": 1, "doc": shipped})
        assert changed_columns(event, patch) == expected


@pytest.mark.parametrize("at_hand", ["x" * 5000, {"b": "y" * 3000, "a": "z" * 3000}])
def test_a_stored_large_value_in_memory_gives_the_same_answer_as_its_digest(at_hand: Any) -> None:
    # text at hand is compared as text (cheaper than a digest); anything else by digest, which
    # tells an object's key order apart
    (ref,) = (large_cells({"doc": at_hand}, DEFAULT_THRESHOLD, None) or {}).values()

    class InMemory:
        def read(self, ref: Any) -> Any:
            raise AssertionError("read a large value")

        def peek(self, ref: Any) -> Any:
            return at_hand

    stored = LazyImage({"id": 1, "doc": ref.out_of_line()}, InMemory())
    reordered = dict(reversed(at_hand.items())) if isinstance(at_hand, dict) else at_hand + "!"
    for shipped, expected in ((at_hand, ()), (reordered, ("doc",)), (5, ("doc",))):
        event = ChangeEvent(Op.UPDATE, None, {"id": 1, "doc": shipped})
        patch = Patch(old_image=stored, new_image={"id": 1, "doc": shipped})
        assert changed_columns(event, patch) == expected


def test_values_compare_as_the_sink_sees_them() -> None:
    assert not same_value(1, True)
    assert not same_value(Decimal("1.0"), Decimal("1.00"))
    assert same_value(Decimal("1.50"), Decimal("1.50"))
    assert not same_value(1, 1.0)
    assert same_value({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not same_value({"a": [1]}, {"a": [True]})
    assert not same_value({"a": 1}, {"b": 1})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), with_schema=st.booleans(), placeholder=st.sampled_from(PLACEHOLDERS))
def test_changed_is_the_full_identity_difference(
    data: st.DataObject, with_schema: bool, placeholder: str
) -> None:
    """Random histories shipped as under the default replica identity (placeholders, null and
    key-only `before`, key changes, redeliveries): every output's header equals the set
    difference of what REPLICA IDENTITY FULL ships for it."""
    options = FormatOptions(placeholder=placeholder)
    model = DebeziumModel(PlaceholderForms(options.placeholder_bytes), with_schema)
    build_history(data, model)
    hydrator = debezium_hydrator(options=options)
    states: dict[str, Any] = {}

    def emitted(step: Transition) -> list[Any]:
        outs = list(step.emitted)
        for handoff in step.handoffs:  # delivered at once, as a task owning both keys does
            applied = hydrator.receive_handoff(states.get(handoff.new_key), handoff, 0)
            states[handoff.new_key] = applied.state
            outs += emitted(applied)
        return outs

    for rendered in model.log:
        key = hydrator.route(rendered.default)
        assert isinstance(key, str)
        step = engine_step(hydrator, states.get(key), rendered.default, 0)
        states[key] = step.state
        for out in emitted(step):
            if out.value is None:
                continue
            full = next(r.full_value for r in model.log if r.default.offset == _offset(out.headers))
            assert full is not None
            header = dict(out.headers)[HEADER_CHANGED].decode()
            assert set(filter(None, header.split(","))) == _difference(full), (full, header)


def _offset(headers: Any) -> int:
    return int(dict(headers)["hydrator.source"].decode().rsplit(":", 1)[1])


def _difference(full: dict[str, Any]) -> set[str]:
    before, after = full["before"], full["after"]
    if full["op"] == "d":
        return set()
    if full["op"] in ("c", "r"):
        return set(after)
    return {c for c in after if before[c] != after[c] or type(before[c]) is not type(after[c])}


# -- the other formats -------------------------------------------------------------------------


def test_ydb_rows() -> None:
    feed = Feed("ydb")
    first = feed.step({"key": [1], "update": {"a": 1, "b": "x"}})
    assert changed_of(first) == ["a", "b"]
    assert changed_of(feed.step({"key": [1], "update": {"b": "y"}})) == ["b"]
    assert changed_of(feed.step({"key": [1], "reset": {"a": 1}})) == ["b"]  # b becomes NULL
    assert changed_of(feed.step({"key": [1], "erase": {}})) == []


def test_cockroachdb_rows() -> None:
    feed = Feed("cockroachdb")
    key = [1]
    assert changed_of(feed.step({"after": {"id": 1, "a": 1}, "updated": "10.0"}, key)) == [
        "id",
        "a",
    ]
    assert changed_of(feed.step({"after": {"id": 1, "a": 2}, "updated": "20.0"}, key)) == ["a"]
    assert changed_of(feed.step({"after": None, "updated": "30.0"}, key)) == []


def cassandra(op: str, ts: int, **cells: Any) -> dict[str, Any]:
    after = {
        c: None if v is None else {"value": v, "deletion_ts": None, "set": True}
        for c, v in cells.items()
    }
    return {"op": op, "ts_ms": 1, "source": {"connector": "cassandra", "ts_us": ts}, "after": after}


def test_cassandra_rows_by_winning_cell() -> None:
    feed = Feed("cassandra")
    key = {"id": 1}
    assert changed_of(feed.step(cassandra("i", 10, id=1, a=1, b="x"), key)) == ["id", "a", "b"]
    assert changed_of(feed.step(cassandra("u", 20, id=1, a=2, b=None), key)) == ["a"]
    # an older write that loses to the stored cell changes nothing
    assert changed_of(feed.step(cassandra("u", 15, id=1, a=9, b=None), key)) == []
