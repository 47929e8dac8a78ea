"""`--format debezium --fill-absent`: patch streams, where a change ships only the columns it
wrote. Hand-written events, then random histories against full images."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import Hydrator, RawRecord
from hydrator.core.records import HEADER_FILLED
from hydrator.formats import FormatOptionError, FormatOptions, codec_for
from state.record import StateRecord
from tests.support.core import engine_step
from tests.support.patch_model import PatchEvent, PatchStream, key_bytes, mismatches

P = "__debezium_unavailable_value"
ROW = {"id": 1, "a": "A", "b": 2, "doc": "D" * 100}


def patch_hydrator() -> Hydrator:
    return Hydrator(codec_for("debezium", FormatOptions(fill_absent=True)))


def record(
    op: str, before: Any, after: Any, pos: int, headers: tuple = (), key: int = 1
) -> RawRecord:
    source = {"connector": "mysql", "file": "binlog.000001", "pos": pos, "row": 0}
    value = orjson.dumps({"before": before, "after": after, "source": source, "op": op})
    return RawRecord("raw", 0, pos, key_bytes(key), value, headers)


def feed(hydrator: Hydrator, *records: RawRecord, state: StateRecord | None = None) -> Any:
    out = None
    for item in records:
        out = engine_step(hydrator, state, item, 0)
        state = out.state
    return out


def images(out: Any) -> tuple[Any, Any]:
    document = orjson.loads(out.emitted[0].value)
    return document["before"], document["after"]


def inserted(hydrator: Hydrator) -> StateRecord:
    return feed(hydrator, record("c", None, ROW, 10)).state


def test_an_update_gets_the_columns_it_did_not_ship() -> None:
    hydrator = patch_hydrator()
    out = feed(hydrator, record("u", None, {"id": 1, "b": 3}, 11), state=inserted(hydrator))
    before, after = images(out)
    assert after == {**ROW, "b": 3} and before == ROW
    assert dict(out.emitted[0].headers)[HEADER_FILLED] == b"a,doc"
    assert out.state.image == {**ROW, "b": 3}


def test_a_partial_before_is_completed_and_a_key_only_one_replaced() -> None:
    hydrator = patch_hydrator()
    state = inserted(hydrator)
    partial = feed(hydrator, record("u", {"id": 1, "b": 2}, {"id": 1, "b": 3}, 11), state=state)
    assert images(partial)[0] == ROW
    deleted = feed(hydrator, record("d", {"id": 1}, None, 12), state=partial.state)
    assert images(deleted) == ({**ROW, "b": 3}, None)
    assert deleted.state.deleted


def test_a_snapshot_read_and_a_create_are_filled_too() -> None:
    hydrator = patch_hydrator()
    out = feed(hydrator, record("r", None, {"id": 1, "a": "A2"}, 11), state=inserted(hydrator))
    assert images(out)[1] == {**ROW, "a": "A2"}


def test_placeholders_still_fill_beside_absent_columns() -> None:
    hydrator = patch_hydrator()
    out = feed(hydrator, record("u", None, {"id": 1, "doc": P}, 11), state=inserted(hydrator))
    assert images(out)[1] == ROW


def test_without_the_flag_an_absent_column_is_a_dropped_column() -> None:
    hydrator = Hydrator(codec_for("debezium"))
    state = feed(hydrator, record("c", None, ROW, 10)).state
    out = feed(hydrator, record("u", None, {"id": 1, "b": 3}, 11), state=state)
    assert images(out)[1] == {"id": 1, "b": 3}
    assert out.state.image == {"id": 1, "b": 3}


def test_a_redelivered_patch_is_stale() -> None:
    hydrator = patch_hydrator()
    update = record("u", None, {"id": 1, "b": 3}, 11)
    done = feed(hydrator, update, state=inserted(hydrator))
    again = feed(hydrator, update, state=done.state)
    assert again.emitted == () and again.counts == {"stale_dropped": 1}


def test_the_schema_envelope_keeps_its_schema() -> None:
    """Filled columns join the payload; the schema is left as the producer wrote it."""
    hydrator = patch_hydrator()
    schema = {"type": "struct", "fields": [{"field": "before"}, {"field": "after"}]}
    fields = [{"field": "id", "type": "int32"}, {"field": "b", "type": "int32"}]
    schema["fields"] = [{**f, "type": "struct", "fields": fields} for f in schema["fields"]]
    source = {"connector": "mysql", "file": "binlog.000001", "pos": 11, "row": 0}
    payload = {"before": None, "after": {"id": 1, "b": 3}, "source": source, "op": "u"}
    value = orjson.dumps({"schema": schema, "payload": payload})
    out = feed(hydrator, RawRecord("raw", 0, 11, key_bytes(1), value), state=inserted(hydrator))
    document = orjson.loads(out.emitted[0].value)
    assert document["schema"] == schema
    assert document["payload"]["after"] == {**ROW, "b": 3}


def test_a_key_change_waits_for_the_old_row_even_without_placeholders() -> None:
    hydrator = patch_hydrator()
    old = inserted(hydrator)
    delete = record("d", {"id": 1}, None, 11, (("__debezium.newkey", key_bytes(2)),))
    create = record("c", None, {"id": 2, "b": 3}, 12, (("__debezium.oldkey", key_bytes(1)),), 2)
    parked = feed(hydrator, create)
    assert parked.counts == {"parked": 1} and parked.emitted == ()
    (handoff,) = feed(hydrator, delete, state=old).handoffs
    released = hydrator.receive_handoff(parked.state, handoff, 0)
    assert images(released)[1] == {**ROW, "id": 2, "b": 3}


@pytest.mark.parametrize("name", ["auto", "cockroachdb", "nonsense"])
def test_other_formats_refuse_the_option(name: str) -> None:
    with pytest.raises(FormatOptionError, match="only with --format debezium") as raised:
        codec_for(name, FormatOptions(fill_absent=True))
    assert raised.value.option == "--fill-absent"


# -- random patch histories ---------------------------------------------------------------------

VALUES = st.none() | st.integers(-(2**70), 2**70) | st.text(max_size=12) | st.lists(st.integers())
COLUMNS = ("a", "b", "c", "doc")


@st.composite
def histories(draw: st.DrawFn) -> PatchStream:
    stream = PatchStream()
    for _ in range(draw(st.integers(1, 40))):
        live = sorted(stream.rows)
        free = [k for k in range(1, 8) if k not in stream.rows]  # new keys, or deleted ones
        actions = ["update", "update", "update", "delete", "redeliver"] if live else []
        action = draw(st.sampled_from(actions + (["insert"] if free else [])))
        if action == "insert":
            key = draw(st.sampled_from(free))
            # later columns join the table over time: an insert may know fewer
            columns = draw(st.lists(st.sampled_from(COLUMNS), unique=True))
            stream.insert(key, {c: draw(VALUES) for c in columns})
        elif action == "update":
            key = draw(st.sampled_from(live))
            changed = draw(st.lists(st.sampled_from((*COLUMNS, "added")), unique=True))
            before = draw(st.sampled_from(["null", "key", "partial"]))
            kept = tuple(draw(st.lists(st.sampled_from(COLUMNS), unique=True)))
            stream.update(key, {c: draw(VALUES) for c in changed}, before, kept)
        elif action == "delete":
            before = draw(st.sampled_from(["key", "partial"]))
            kept = tuple(draw(st.lists(st.sampled_from(COLUMNS), unique=True)))
            stream.delete(draw(st.sampled_from(live)), before, kept)
        elif stream.events:
            stream.redeliver(draw(st.integers(1, 6)))
    return stream


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_a_hydrated_patch_stream_equals_the_full_row_history(stream: PatchStream) -> None:
    hydrator = patch_hydrator()
    states: dict[str, StateRecord | None] = {}
    expected: list[PatchEvent] = []
    got: list[bytes | None] = []
    for offset, event in enumerate(stream.events):
        key, value, _ = event.record
        raw = RawRecord("raw", 0, offset, key, value)
        route = hydrator.route(raw)
        assert isinstance(route, str)
        out = hydrator.process(states.get(route), raw, route, 0)
        states[route] = out.state
        assert not out.dead and not out.handoffs
        if event.duplicate:
            assert out.emitted == () and out.counts == {"stale_dropped": 1}
            continue
        expected.append(event)
        got += [o.value for o in out.emitted]
    assert len(got) == len(expected)
    problems = [
        p for event, value in zip(expected, got, strict=True) for p in mismatches(event, value)
    ]
    assert problems == []
