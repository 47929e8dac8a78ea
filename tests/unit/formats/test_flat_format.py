"""`--format debezium-flat`: rows from Debezium's `ExtractNewRecordState` SMT (docs/formats.md,
"Flattened rows"): unit cases from the SMT's shapes, bad input, and a property test against the
JSON envelope's hydration of the same history."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import DeadLetter, Hydrator, RawRecord, Read
from hydrator.core.records import HEADER_FILLED
from hydrator.events import Op
from hydrator.formats import FormatOptions, codec_for
from hydrator.formats.flat import columns
from hydrator.formats.placeholders import PlaceholderForms
from tests.support.core import engine_step
from tests.support.debezium_model import DebeziumModel
from tests.support.flat_model import FlatLog, full_row
from tests.unit.core.test_hydration_properties import PLACEHOLDERS, build_history, hydrate_log

P = "__debezium_unavailable_value"
KEY = b'{"id":1}'


def flat(fmt: str = "debezium-flat") -> Hydrator:
    return Hydrator(codec_for(fmt))


def record(
    value: dict[str, Any] | None,
    offset: int = 0,
    key: bytes | None = KEY,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> RawRecord:
    return RawRecord("t", 0, offset, key, None if value is None else orjson.dumps(value), headers)


def run(hydrator: Hydrator, values: list[dict[str, Any] | None]) -> list[Any]:
    state = None
    out: list[Any] = []
    for offset, value in enumerate(values):
        step = engine_step(hydrator, state, record(value, offset), 0)
        assert not step.dead, step.dead
        state = step.state
        out += [None if o.value is None else orjson.loads(o.value) for o in step.emitted]
    return out


ROW = {"id": 1, "small": 1, "body": "long text", "blob": "AAEC", "tags": ["a"]}


@pytest.mark.parametrize("fmt", ["debezium-flat", "auto"])
def test_placeholders_are_filled_and_the_dunder_fields_kept(fmt: str) -> None:
    update = {
        "id": 1,
        "small": 2,
        "body": P,
        "blob": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
        "tags": [P],
        "__op": "u",
        "__lsn": 20,
        "__deleted": "false",
    }
    out = run(flat(fmt), [{**ROW, "__op": "c", "__lsn": 10, "__deleted": "false"}, update])
    assert out[1] == {**ROW, "small": 2, "__op": "u", "__lsn": 20, "__deleted": "false"}
    assert list(out[1]) == list(update), "field order kept"


def test_a_rewritten_delete_carries_the_whole_last_row() -> None:
    key_only = {"id": 1, "small": None, "body": None, "blob": None, "tags": None}
    out = run(flat(), [{**ROW, "__op": "c"}, {**key_only, "__op": "d", "__deleted": "true"}])
    assert out[1] == {**ROW, "__op": "d", "__deleted": "true"}


def test_a_tombstone_is_a_delete_and_stays_a_tombstone() -> None:
    hydrator = flat()
    first = engine_step(hydrator, None, record({**ROW, "__op": "c"}), 0)
    gone = engine_step(hydrator, first.state, record(None, 1), 0)
    assert [o.value for o in gone.emitted] == [None]
    assert gone.state is not None and gone.state.deleted
    again = engine_step(hydrator, gone.state, record({"id": 1, "body": P, "__op": "u"}, 2), 0)
    assert orjson.loads(again.emitted[0].value)["body"] == P, "a deleted row fills nothing"


def test_without_op_a_row_is_an_update_and_without_position_nothing_is_stale() -> None:
    out = run(
        flat(),
        [
            {**ROW, "__deleted": "false"},
            {"id": 1, "body": P, "__deleted": "false"},
            {**ROW, "__deleted": "false"},
        ],
    )
    assert [o["body"] for o in out] == ["long text"] * 3


def test_a_position_orders_a_keys_rows() -> None:
    hydrator = flat()
    first = engine_step(hydrator, None, record({**ROW, "__op": "c", "__lsn": 10}), 0)
    stale = engine_step(hydrator, first.state, record({**ROW, "__op": "u", "__lsn": 10}, 1), 0)
    assert stale.emitted == () and stale.counts.get("stale_dropped") == 1
    seq = '["0","30"]'
    later = engine_step(
        hydrator, first.state, record({**ROW, "__op": "u", "__source_sequence": seq}, 2), 0
    )
    assert len(later.emitted) == 1


def test_a_key_change_travels_through_the_headers() -> None:
    hydrator = flat()
    state = engine_step(hydrator, None, record({**ROW, "__op": "c"}), 0).state
    key_only = {"id": 1, "small": None, "body": None, "blob": None, "tags": None}
    delete = engine_step(
        hydrator,
        state,
        record(
            {**key_only, "__op": "d", "__deleted": "true"},
            1,
            headers=(("__debezium.newkey", b'{"id":2}'),),
        ),
        0,
    )
    [handoff] = delete.handoffs
    create = record(
        {**ROW, "id": 2, "body": P, "__op": "c"},
        2,
        key=b'{"id":2}',
        headers=(("__debezium.oldkey", b'{"id":1}'),),
    )
    parked = engine_step(hydrator, None, create, 0)
    assert parked.emitted == () and parked.state is not None and parked.state.is_parked
    released = hydrator.receive_handoff(parked.state, handoff, 0)
    [out] = released.emitted
    assert orjson.loads(out.value)["body"] == "long text"
    assert dict(out.headers)[HEADER_FILLED] == b"body"


def test_schema_envelope_rows_use_the_field_types() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"field": "id", "type": "int32"},
            {"field": "body", "type": "string"},
            {"field": "note", "type": "bytes"},
            {"field": "__op", "type": "string"},
        ],
    }
    hydrator = flat()
    create = {"schema": schema, "payload": {"id": 1, "body": "b", "note": P, "__op": "c"}}
    update = {"schema": schema, "payload": {"id": 1, "body": P, "note": P, "__op": "u"}}
    out = run(hydrator, [create, update])
    # `note` is bytes: P's text there is a value, not the placeholder (whose bytes are base64)
    assert out[1]["payload"] == {"id": 1, "body": "b", "note": P, "__op": "u"}


BAD = [
    ("a row without a key", None, {**ROW, "__op": "c"}, "without a Kafka key"),
    ("an unknown __op", KEY, {**ROW, "__op": "x"}, "unknown __op 'x'"),
    ("a malformed position", KEY, {**ROW, "__op": "c", "__source_sequence": "[x"}, "position"),
    ("not JSON", KEY, b"{nope", "not JSON"),
    ("a JSON array", KEY, [1], "not an object"),
]


@pytest.mark.parametrize("case,key,value,reason", BAD, ids=[b[0] for b in BAD])
def test_bad_rows_are_dead_letters_with_reasons(
    case: str, key: bytes | None, value: Any, reason: str
) -> None:
    raw = value if isinstance(value, bytes) else orjson.dumps(value)
    rec = RawRecord("t", 0, 0, key, raw)
    hydrator = flat()
    routed = hydrator.route(rec)
    if isinstance(routed, DeadLetter):
        assert reason in routed.reason, routed.reason
        return
    step = hydrator.process(None, rec, routed, 0)
    assert step.emitted == () and len(step.dead) == 1
    assert reason in step.dead[0].reason, step.dead[0].reason


def test_decode_names_the_op_and_key_columns() -> None:
    codec = codec_for("debezium-flat")
    event = codec.decode(Read(record({"id": 1, "body": None, "__op": "d", "__deleted": "true"})))
    assert event.op is Op.DELETE and event.key_columns == frozenset({"id"})  # type: ignore[union-attr]
    assert columns({"a": 1, "__op": "c"}) == {"a": 1}


# -- the property: the SMT's rows hydrate to the full identity's rows, as the JSON envelope does --


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    placeholder=st.sampled_from(PLACEHOLDERS),
    # `rewrite` only: under the SMT's default (deletes as tombstones) a delete and the handoff
    # of a key change carry no position, so the redeliveries and the twice-delivered handoffs
    # this property draws cannot be told from new ones (docs/formats.md, "Flattened rows");
    # tombstone deletes are covered by the unit cases above
    deletes=st.just("rewrite"),
    fmt=st.sampled_from(["debezium-flat", "auto"]),
)
def test_flattened_history_equals_full_identity_rows(
    data: st.DataObject, placeholder: str, deletes: str, fmt: str
) -> None:
    options = FormatOptions(placeholder=placeholder)
    model = DebeziumModel(PlaceholderForms(options.placeholder_bytes), with_schema=False)
    build_history(data, model)
    log = FlatLog.of(model, deletes)
    outputs = hydrate_log(data, log, Hydrator(codec_for(fmt, options)))  # type: ignore[arg-type]
    expected: dict[int, list[dict[str, Any]]] = {}
    for rendered in log.log:
        full = rendered.full_value
        if rendered.duplicate or full is None or rendered.default.value is None:
            continue
        expected.setdefault(rendered.key_id, []).append(full_row(full))
    got = {k: [columns(row) for row in rows] for k, rows in outputs.items()}
    assert got.keys() == expected.keys()
    for key, rows in expected.items():
        assert len(got[key]) == len(rows), (key, [r.get("__op") for r in outputs[key]])
        for i, (hydrated, full) in enumerate(zip(got[key], rows, strict=True)):
            assert hydrated == full, (key, i, outputs[key][i])


def test_a_framed_value_without_a_registry_names_the_option() -> None:
    record = RawRecord("t", 0, 0, KEY, b"\x00\x00\x00\x00\x07\x02\x04")
    step = Hydrator(codec_for("auto")).process(None, record, '{"id":1}', 0)
    [dead] = step.dead
    assert "Confluent-framed Avro (schema id 7)" in dead.reason
    assert "--schema-registry-url" in dead.reason
