"""Confluent-framed Avro through a schema registry (docs/formats.md, "Avro with a schema
registry"): the in-memory Confluent-compatible registry on a loopback port (the real HTTP
client talks to it), framing with the same schema id, placeholders per Avro type, schema
evolution, bad input, a registry that does not answer, and a property test per envelope
against the JSON envelope's hydration of the same history."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import DeadLetter, Hydrator, RawRecord
from hydrator.demo.schema_registry import InMemorySchemaRegistry
from hydrator.events import Unavailable
from hydrator.formats import FormatOptions, codec_for
from hydrator.formats.avro import schema_id_of
from hydrator.formats.flat import columns
from hydrator.formats.placeholders import PlaceholderForms
from tests.support import avro_model as am
from tests.support.core import engine_step
from tests.support.debezium_model import DebeziumModel, Rendered
from tests.unit.core.test_hydration_properties import PLACEHOLDERS, build_history

P = "__debezium_unavailable_value"


@pytest.fixture(scope="module")
def registry() -> Iterator[InMemorySchemaRegistry]:
    with InMemorySchemaRegistry() as running:
        yield running


def ids_in(registry: InMemorySchemaRegistry) -> dict[str, int]:
    return {
        "key": registry.register("t-key", json.dumps(am.KEY_SCHEMA)),
        "envelope": registry.register("t-value", json.dumps(am.envelope_schema())),
        "flat": registry.register("flat-value", json.dumps(am.flat_schema())),
    }


def options(
    registry: InMemorySchemaRegistry, placeholder: str = P, wait_s: float = 60
) -> FormatOptions:
    return FormatOptions(
        placeholder=placeholder, schema_registry_url=registry.url, schema_registry_wait_s=wait_s
    )


def drive(hydrator: Hydrator, log: list[Rendered]) -> tuple[dict[int, list[bytes]], list[Any]]:
    """The core as an engine drives it, handoffs applied at once; outputs per key id."""
    states: dict[str, Any] = {}
    outputs: dict[int, list[bytes]] = defaultdict(list)
    dead: list[Any] = []
    ids: dict[str, int] = {}

    def collect(step: Any) -> None:
        dead.extend(step.dead)
        for out in step.emitted:
            if out.value is not None:
                outputs[ids[hydrator.route(RawRecord("t", 0, 0, out.key, None))]].append(  # type: ignore[index]
                    out.value
                )
        for handoff in step.handoffs:
            follow = hydrator.receive_handoff(states.get(handoff.new_key), handoff, 0)
            states[handoff.new_key] = follow.state
            collect(follow)

    for rendered in log:
        key = hydrator.route(rendered.default)
        assert isinstance(key, str), key
        ids[key] = rendered.key_id
        step = engine_step(hydrator, states.get(key), rendered.default, 0)
        states[key] = step.state
        collect(step)
    return outputs, dead


def expected_rows(log: list[Rendered], flat: bool) -> dict[int, list[dict[str, Any]]]:
    expected: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for rendered in log:
        full = rendered.full_value
        if full is None or rendered.duplicate or rendered.default.value is None:
            continue
        if flat:
            expected[rendered.key_id].append(
                am.avro_row(full["before"] if full["op"] == "d" else full["after"])  # type: ignore[arg-type]
            )
        else:
            expected[rendered.key_id].append(
                {"before": am.avro_row(full["before"]), "after": am.avro_row(full["after"])}
            )
    return expected


# -- the property, per envelope ----------------------------------------------------------------


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    data=st.data(),
    placeholder=st.sampled_from(PLACEHOLDERS),
    envelope=st.sampled_from(["debezium", "flat"]),
    fmt=st.sampled_from(["named", "auto"]),
)
def test_avro_history_round_trips_to_the_full_identity(
    registry: InMemorySchemaRegistry, data: st.DataObject, placeholder: str, envelope: str, fmt: str
) -> None:
    """decode -> hydrate -> encode of the Avro records gives, decoded with the schema their id
    names, what the JSON envelope's hydration gives for the same history: the full rows."""
    opts = options(registry, placeholder)
    model = DebeziumModel(PlaceholderForms(opts.placeholder_bytes), with_schema=False)
    build_history(data, model)
    ids = ids_in(registry)
    log = am.AvroLog(model, ids, envelope).log
    name = ("debezium" if envelope == "debezium" else "debezium-flat") if fmt == "named" else "auto"
    outputs, dead = drive(Hydrator(codec_for(name, opts)), log)
    assert not dead, dead
    schema = am.envelope_schema() if envelope == "debezium" else am.flat_schema()
    got: dict[int, list[dict[str, Any]]] = {}
    for key_id, values in outputs.items():
        for value in values:
            assert schema_id_of(value) == ids["envelope" if envelope == "debezium" else "flat"]
            document = am.decode(schema, value)
            row = (
                columns(document)
                if envelope == "flat"
                else {"before": document["before"], "after": document["after"]}
            )
            got.setdefault(key_id, []).append(row)
    assert got == expected_rows(log, envelope == "flat")


# -- unit cases ------------------------------------------------------------------------------


def _create_update(
    registry: InMemorySchemaRegistry, envelope_id: int, key_id: int
) -> list[RawRecord]:
    row = {
        "id": 1,
        "small": 1,
        "txt": "text",
        "doc": '{"a":1}',
        "bin": b"\x00\x01",
        "tags": ["t"],
        "nums": [1, 2],
        "ids": ["b68a35a7-17ad-35b3-af2a-ae46edb4545b"],
        "attrs": {"k": "v"},
    }
    forms = PlaceholderForms(P.encode())
    shipped = {
        **row,
        "small": 2,
        "txt": P,
        "doc": P,
        "bin": P.encode(),
        "tags": [P],
        "nums": list(P.encode()),
        "ids": [forms.uuid],
        "attrs": {P: P},
    }
    source = {"connector": "postgresql", "lsn": 10, "sequence": '["0","10"]'}
    key = am.encode(am.KEY_SCHEMA, key_id, {"id": 1})
    create = am.encode(
        am.envelope_schema(),
        envelope_id,
        {"before": None, "after": row, "source": source, "op": "c", "ts_ms": 1},
    )
    update = am.encode(
        am.envelope_schema(),
        envelope_id,
        {
            "before": None,
            "after": shipped,
            "source": {**source, "lsn": 20, "sequence": '["10","20"]'},
            "op": "u",
            "ts_ms": 2,
        },
    )
    return [RawRecord("t", 0, 0, key, create), RawRecord("t", 0, 1, key, update)]


def test_every_placeholder_type_is_filled_and_the_schema_id_kept(
    registry: InMemorySchemaRegistry,
) -> None:
    ids = ids_in(registry)
    create, update = _create_update(registry, ids["envelope"], ids["key"])
    hydrator = Hydrator(codec_for("debezium", options(registry)))
    first = engine_step(hydrator, None, create, 0)
    second = engine_step(hydrator, first.state, update, 0)
    [out] = second.emitted
    assert out.key == update.key, "key bytes as they came"
    assert schema_id_of(out.value) == ids["envelope"]  # type: ignore[arg-type]
    after = am.decode(am.envelope_schema(), out.value)["after"]  # type: ignore[arg-type]
    created = am.decode(am.envelope_schema(), create.value)["after"]  # type: ignore[arg-type]
    assert after == {**created, "small": 2}
    assert dict(out.headers)["hydrator.filled"] == b"txt,doc,bin,tags,nums,ids,attrs"
    assert am.decode(am.envelope_schema(), out.value)["before"] == created  # type: ignore[arg-type]


def test_json_values_still_read_beside_avro(registry: InMemorySchemaRegistry) -> None:
    hydrator = Hydrator(codec_for("auto", options(registry)))
    value = orjson.dumps({"before": None, "after": {"id": 1, "v": "x"}, "source": {}, "op": "c"})
    step = engine_step(hydrator, None, RawRecord("t", 0, 0, b'{"id":1}', value), 0)
    assert [o.value for o in step.emitted] == [value]


def test_schema_evolution_fills_by_column_with_the_events_schema(
    registry: InMemorySchemaRegistry,
) -> None:
    """A column dropped, then one added (new schema ids): the dropped one is not written, the
    new one stays as the event has it, the others are filled from the stored image."""
    ids = ids_in(registry)
    create, _ = _create_update(registry, ids["envelope"], ids["key"])
    dropped = [f for f in am.value_fields() if f["name"] != "attrs"]
    added = [*dropped, {"name": "extra", "type": ["null", "string"], "default": None}]
    dropped_id = registry.register("t-value", json.dumps(am.envelope_schema(dropped)))
    added_id = registry.register("t-value", json.dumps(am.envelope_schema(added)))
    source = {"connector": "postgresql", "lsn": 30, "sequence": None}
    shipped = {
        "id": 1,
        "small": 3,
        "txt": P,
        "doc": P,
        "bin": None,
        "tags": None,
        "nums": None,
        "ids": None,
    }
    hydrator = Hydrator(codec_for("debezium", options(registry)))
    state = engine_step(hydrator, None, create, 0).state
    update = am.encode(
        am.envelope_schema(dropped),
        dropped_id,
        {"before": None, "after": shipped, "source": source, "op": "u"},
    )
    step = engine_step(hydrator, state, RawRecord("t", 0, 1, create.key, update), 0)
    [out] = step.emitted
    assert schema_id_of(out.value) == dropped_id  # type: ignore[arg-type]
    decoded = am.decode(am.envelope_schema(dropped), out.value)  # type: ignore[arg-type]
    assert decoded["after"]["txt"] == "text" and "attrs" not in decoded["after"]
    assert "attrs" not in decoded["before"], "a stored column the schema lacks is not written"
    later = am.encode(
        am.envelope_schema(added),
        added_id,
        {
            "before": None,
            "after": {**shipped, "small": 4, "extra": "new"},
            "source": {**source, "lsn": 40},
            "op": "u",
        },
    )
    step = engine_step(hydrator, step.state, RawRecord("t", 0, 2, create.key, later), 0)
    decoded = am.decode(am.envelope_schema(added), step.emitted[0].value)  # type: ignore[arg-type]
    assert decoded["after"]["extra"] == "new" and decoded["after"]["doc"] == '{"a":1}'
    assert decoded["before"]["extra"] is None, "the stored row never had it"


def test_bad_avro_input_is_a_dead_letter_with_the_reason(registry: InMemorySchemaRegistry) -> None:
    ids = ids_in(registry)
    create, _ = _create_update(registry, ids["envelope"], ids["key"])
    hydrator = Hydrator(codec_for("auto", options(registry)))
    cases = {
        "unknown to the schema registry": RawRecord(
            "t", 0, 0, b'{"id":1}', b"\x00\x00\x01\x00\x00\x02"
        ),
        "does not decode with schema id": RawRecord(
            "t",
            0,
            1,
            create.key,
            create.value[:5] + b"\x02\xff\xff",  # type: ignore[index]
        ),
        "bytes left over": RawRecord("t", 0, 2, create.key, create.value + b"\x00"),  # type: ignore[operator]
        "key: schema id 4095 is unknown": RawRecord(
            "t", 0, 3, b"\x00\x00\x00\x0f\xff\x02", create.value
        ),
    }
    for reason, record in cases.items():
        routed = hydrator.route(record)
        if isinstance(routed, DeadLetter):
            assert reason in routed.reason, routed.reason
            continue
        step = hydrator.process(None, record, routed, 0)
        assert len(step.dead) == 1 and reason in step.dead[0].reason, (reason, step.dead)


def test_a_flat_avro_row_without_a_key_is_a_dead_letter(registry: InMemorySchemaRegistry) -> None:
    ids = ids_in(registry)
    row = {**{f["name"]: None for f in am.flat_schema()["fields"]}, "id": 1, "__op": "c"}
    value = am.encode(am.flat_schema(), ids["flat"], row)
    hydrator = Hydrator(codec_for("debezium-flat", options(registry)))
    routed = hydrator.route(RawRecord("t", 0, 0, None, value))
    assert isinstance(routed, DeadLetter) and "without a Kafka key" in routed.reason


def test_a_registry_that_does_not_answer_is_unavailable_never_a_dead_letter() -> None:
    stopped = InMemorySchemaRegistry().start()
    stopped.stop()  # its port now refuses connections
    opts = FormatOptions(schema_registry_url=stopped.url, schema_registry_wait_s=1.5)
    hydrator = Hydrator(codec_for("auto", opts))
    record = RawRecord("t", 0, 0, b'{"id":1}', b"\x00\x00\x00\x00\x07\x02")
    key = hydrator.route(record)
    with pytest.raises(Unavailable, match="did not answer within"):
        hydrator.process(None, record, key, 0)  # type: ignore[arg-type]
