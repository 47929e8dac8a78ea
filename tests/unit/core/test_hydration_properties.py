"""Property: random per-key histories rendered the way Debezium ships them under the default
replica identity hydrate back into exactly what a REPLICA IDENTITY FULL table ships."""

from __future__ import annotations

import string
import uuid
from collections import defaultdict
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import Handoff, Hydrator
from hydrator.core.records import HEADER_UNRESOLVED
from hydrator.formats import FormatOptions
from hydrator.formats.placeholders import PlaceholderForms
from tests.support.core import debezium_hydrator, engine_step
from tests.support.debezium_model import COLUMNS, DebeziumModel, b64, payload_of

words = st.text(alphabet=string.ascii_letters + string.digits + " éü€", max_size=30)
COLUMN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "small": st.integers(-(2**31), 2**31 - 1),
    "txt": words,
    "doc": st.dictionaries(st.sampled_from("abc"), st.integers(-1000, 1000)).map(
        lambda d: orjson.dumps(d).decode()
    ),
    "bin": st.binary(max_size=40).map(b64),
    "tags": st.lists(words, max_size=4),
    "nums": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
    "ids": st.lists(st.uuids().map(str), max_size=3),
    "attrs": st.dictionaries(words, words, max_size=3),
}
PLACEHOLDERS = ["__debezium_unavailable_value", "~unchanged~", "hex:5f5f6d795f756e617661696c"]


def row_values(data: st.DataObject, columns: list[str]) -> dict[str, Any]:
    return {c: data.draw(st.none() | COLUMN_VALUES[c], label=c) for c in columns}


def build_history(data: st.DataObject, model: DebeziumModel) -> None:
    value_columns = [c for c in COLUMNS if c != "id"]
    next_id = 1
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        live = sorted(model.rows)
        action = data.draw(
            st.sampled_from(
                ["insert", "update", "update", "update", "delete", "change_key", "redeliver"]
                if live
                else ["insert"]
            ),
            label="action",
        )
        if action == "insert":
            # re-inserting a deleted id is as likely as a new one
            free = [i for i in range(1, next_id) if i not in model.rows]
            key = data.draw(st.sampled_from([*free, next_id]), label="insert id")
            next_id = max(next_id, key + 1)
            model.insert({"id": key, **row_values(data, value_columns)})
        elif action == "update":
            key = data.draw(st.sampled_from(live), label="update id")
            touched = data.draw(st.lists(st.sampled_from(value_columns), unique=True), label="cols")
            model.update(key, row_values(data, touched))
        elif action == "delete":
            model.delete(data.draw(st.sampled_from(live), label="delete id"))
        elif action == "change_key":
            key = data.draw(st.sampled_from(live), label="old id")
            free = [i for i in range(1, next_id) if i not in model.rows]
            new_key = data.draw(st.sampled_from([*free, next_id]), label="new id")
            next_id = max(next_id, new_key + 1)
            touched = data.draw(st.lists(st.sampled_from(value_columns), unique=True), label="cols")
            model.change_key(key, new_key, row_values(data, touched))
        else:
            model.redeliver(data.draw(st.integers(1, 5), label="redelivered"))


def hydrate_log(
    data: st.DataObject, model: DebeziumModel, hydrator: Hydrator
) -> dict[int, list[dict[str, Any]]]:
    """Drive the core like an engine would, delivering each handoff a few records late, and now
    and then once more much later: a broker that leaves a killed transaction's records visible
    (Tansu) delivers both the dead copy and the one the restarted engine writes again."""
    states: dict[str, Any] = {}
    in_flight: list[tuple[int, Handoff]] = []
    outputs: dict[int, list[dict[str, Any]]] = defaultdict(list)

    def collect(transition: Any) -> None:
        for out in transition.emitted:
            assert out.value is None or dict(out.headers).get(HEADER_UNRESOLVED) is None
            if out.value is not None:
                outputs[orjson.loads(out.key).get("payload", orjson.loads(out.key))["id"]].append(
                    payload_of(out.value)
                )
        assert not transition.dead, transition.dead
        for handoff in transition.handoffs:
            delay = data.draw(st.integers(0, 4), label="handoff delay")
            in_flight.append((index + delay, handoff))
            if data.draw(st.integers(0, 4), label="handoff delivered twice") == 0:
                again = data.draw(st.integers(0, 40), label="second copy delay")
                in_flight.append((index + again, handoff))

    def deliver(up_to: float) -> None:
        """Every handoff due by `up_to`, including those that delivering one sends on (a key
        change unparked by its handoff may emit the next key change's handoff)."""
        while due_now := [item for item in in_flight if item[0] <= up_to]:
            for due, handoff in due_now:
                in_flight.remove((due, handoff))
                step = hydrator.receive_handoff(states.get(handoff.new_key), handoff, 0)
                states[handoff.new_key] = step.state
                collect(step)

    for index, rendered in enumerate(model.log):
        deliver(index)
        key = hydrator.route(rendered.default)
        assert isinstance(key, str)
        step = engine_step(hydrator, states.get(key), rendered.default, 0)
        states[key] = step.state
        collect(step)
    index = len(model.log) + 10
    deliver(float("inf"))  # the stream ends; every handoff in flight arrives
    assert not any(s is not None and s.is_parked for s in states.values())
    return outputs


def expected_by_key(model: DebeziumModel) -> dict[int, list[dict[str, Any]]]:
    expected: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for rendered in model.log:
        if rendered.full_value is not None and not rendered.duplicate:
            expected[rendered.key_id].append(rendered.full_value)
    return expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), with_schema=st.booleans(), placeholder=st.sampled_from(PLACEHOLDERS))
def test_hydrated_history_equals_full_identity_history(
    data: st.DataObject, with_schema: bool, placeholder: str
) -> None:
    options = FormatOptions(placeholder=placeholder)
    model = DebeziumModel(PlaceholderForms(options.placeholder_bytes), with_schema)
    build_history(data, model)
    outputs = hydrate_log(data, model, debezium_hydrator(options=options))
    expected = expected_by_key(model)
    assert outputs.keys() == expected.keys()
    for key, events in expected.items():
        got = outputs[key]
        assert [e["op"] for e in got] == [e["op"] for e in events], key
        for hydrated, full in zip(got, events, strict=True):
            assert hydrated["after"] == full["after"]
            assert hydrated["before"] == full["before"]


def test_uuid_spelling_matches_debezium() -> None:
    forms = PlaceholderForms(b"__debezium_unavailable_value")
    assert forms.uuid == "b68a35a7-17ad-35b3-af2a-ae46edb4545a"
    assert uuid.UUID(forms.uuid).version == 3
