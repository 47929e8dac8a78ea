"""`--format auto`: each record's format is told from its value, among every registered format;
the value is parsed once; what no format takes is a dead letter naming the formats tried."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import Hydrator, RawRecord, Read
from hydrator.core.records import DeadLetter
from hydrator.events import Patch
from hydrator.formats import FORMAT_NAMES, FORMATS, FormatOptions, codec_for, values
from hydrator.formats.auto import AutoCodec
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.ops.state_tools import parse_key
from tests.support.core import engine_step
from tests.support.debezium_model import DebeziumModel, envelope_schema
from tests.unit.core.test_hydration_properties import build_history, expected_by_key, hydrate_log

P = "__debezium_unavailable_value"
DEBEZIUM_BARE = {
    "before": None,
    "after": {"id": 1, "doc": P},
    "source": {"connector": "postgresql", "lsn": 10},
    "op": "u",
    "ts_ms": 1,
}
DEBEZIUM_WRAPPED = {"schema": envelope_schema(), "payload": DEBEZIUM_BARE}

# One sample value per format (name -> values), from each format's documented shapes: every
# registered format must have samples here, and each sample must be detected as its format.
UPDATED = "1532377312562986715.0000000000"
CASSANDRA_CELL = {"value": 1, "deletion_ts": None, "set": True}
CASSANDRA = {
    "ts_ms": 1,
    "op": "u",
    "source": {"connector": "cassandra", "ts_us": 1_700_000_000_000_000},
    "after": {"id": CASSANDRA_CELL, "v": None, "_range_start": None, "_range_end": None},
}
SAMPLES: dict[str, list[dict[str, Any]]] = {
    "cassandra": [
        CASSANDRA,
        {**CASSANDRA, "op": "i", "source": {"ts_us": 1}},  # cells, whatever the source says
        {**CASSANDRA, "op": "d", "after": {"id": CASSANDRA_CELL, "v": {**CASSANDRA_CELL}}},
        {**CASSANDRA, "op": "r"},  # a range tombstone, not Debezium's snapshot read
        {"schema": {"type": "struct", "fields": []}, "payload": CASSANDRA},
    ],
    "debezium": [DEBEZIUM_BARE, DEBEZIUM_WRAPPED, {**DEBEZIUM_BARE, "op": "t", "after": None}],
    "debezium-flat": [
        {"id": 1, "doc": P, "__op": "u", "__lsn": 10},
        {"id": 1, "doc": None, "__deleted": "true"},
        # a column named `op`, `after` or `key` does not make it another format
        {"id": 1, "op": "c", "after": None, "key": [1], "__op": "c", "__deleted": "false"},
        {"schema": {"type": "struct", "fields": []}, "payload": {"id": 1, "__op": "r"}},
    ],
    "cockroachdb": [
        {"after": {"id": 1, "name": "Petee"}, "updated": UPDATED},
        {"after": None, "updated": UPDATED},
        {"resolved": UPDATED},
        {"after": {"id": 1}, "before": None, "updated": UPDATED, "mvcc_timestamp": UPDATED},
        {"after": {"id": 1}, "key": [1], "topic": "t", "updated": UPDATED},
    ],
    "ydb": [
        {"key": [1, "one"], "update": {"payload": "lorem ipsum", "date": "2022-02-22"}},
        {"key": [2, "two"], "erase": {}},
        {"key": [1], "reset": {"a": None}, "ts": [1670792400890, 562949953607163]},
        {"key": [1, 2, 3], "update": {}, "newImage": {"t": "v"}, "oldImage": {"t": None}},
        {"resolved": [1670792400890, 562949953607163]},
        {"tableChanges": [{"table": {"schemaVersion": 2}}], "ts": [1, 2]},
    ],
}
# a record key each format's samples can carry
SAMPLE_KEYS = {
    "debezium": b'{"id":1}',
    "debezium-flat": b'{"id":1}',
    "cockroachdb": b"[1]",
    "cassandra": b'{"id":1}',
    "ydb": None,
}


def auto() -> AutoCodec:
    codec = codec_for("auto")
    assert isinstance(codec, AutoCodec)
    return codec


def record(value: Any, key: bytes | None = b'{"id":1}', topic: str = "t") -> RawRecord:
    raw = value if isinstance(value, bytes | None) else orjson.dumps(value)
    return RawRecord(topic, 0, 0, key, raw)


def test_every_registered_format_has_samples_and_auto_chooses_among_them_all() -> None:
    names = [f.name for f in FORMATS]
    assert sorted(SAMPLES) == sorted(names)
    assert [c.name for c in auto().codecs] == names
    assert FORMAT_NAMES[0] == "auto"


@pytest.mark.parametrize(
    ("name", "value"), [(name, v) for name, samples in SAMPLES.items() for v in samples]
)
def test_each_sample_is_detected_as_its_own_format(name: str, value: Any) -> None:
    assert auto().detect(value).name == name


def test_auto_hydrates_as_the_detected_format_does_byte_for_byte() -> None:
    options = FormatOptions()
    forms = PlaceholderForms(options.placeholder_bytes)
    for with_schema in (False, True):
        model = DebeziumModel(forms, with_schema)
        row = {"id": 1, "small": 1, "txt": "a", "doc": "{}", "bin": None}
        model.insert({**row, "tags": ["x"], "nums": [1], "ids": [], "attrs": {}})
        model.update(1, {"small": 2})
        model.delete(1)
        mine, theirs = Hydrator(codec_for("auto")), Hydrator(codec_for("debezium"))
        state_a = state_b = None
        for rendered in model.log:
            a = engine_step(mine, state_a, rendered.default, 0)
            b = engine_step(theirs, state_b, rendered.default, 0)
            assert a.emitted == b.emitted
            state_a, state_b = a.state, b.state


def test_a_value_no_format_takes_is_a_dead_letter_naming_the_formats_tried() -> None:
    hydrator = Hydrator(codec_for("auto"))
    out = engine_step(hydrator, None, record({"hello": "world", "n": 1}), 0)
    assert not out.emitted
    tried = ", ".join(f.name for f in FORMATS)
    assert [d.reason for d in out.dead] == [
        f"auto (tried {tried}): BadInput: no format takes this value: "
        "a JSON object with fields hello, n"
    ]
    for value, said in [
        (b"[1, 2]", "a JSON array, not an object"),
        (b"7", "a JSON number, not an object"),
        (b"null", "a JSON null, not an object"),
        (b"{}", "an empty JSON object"),
    ]:
        assert engine_step(hydrator, None, record(value), 0).dead[0].reason.endswith(said)
    reason = engine_step(hydrator, None, record(b"not json"), 0).dead[0].reason
    assert reason.startswith(f"auto (tried {tried}): BadInput: value is not JSON")


def test_a_kafka_tombstone_passes_through_keyed_by_its_kafka_key() -> None:
    hydrator = Hydrator(codec_for("auto"))
    tombstone = record(None)
    assert hydrator.route(tombstone) == '{"id":1}'
    out = engine_step(hydrator, None, tombstone, 0)
    assert [o.value for o in out.emitted] == [None] and not out.dead
    assert hydrator.route(record(None, key=None)) is None


def test_the_value_is_parsed_once_for_key_and_decode() -> None:
    codec = auto()
    read = Read(record(DEBEZIUM_BARE))
    codec.key(read)
    document = read.document  # parsed for detection, kept in the record's Read
    assert read.parsed and read.chosen is not None and read.chosen.name == "debezium"
    event = codec.decode(read)
    assert event.envelope.envelope.root is document  # type: ignore[union-attr]
    # the document is the Read's own: another Read of the same record parses afresh
    assert values.document(Read(read.record)) is not document


def test_a_format_reading_decimals_reads_again_only_a_value_with_fractions() -> None:
    whole = Read(record(b'{"key": [1], "update": {"n": 12345678901234567890123}}'))
    plain = values.document(whole)
    assert values.document(whole, decimals=True) is plain  # no fraction: the same parse
    fraction = Read(record({"key": [1], "update": {"price": 1.10}}))
    first = values.document(fraction)
    again = values.document(fraction, decimals=True)
    assert again is not first and again["update"]["price"] == Decimal("1.1")
    assert values.document(fraction, decimals=True) is again  # and kept
    # a reader without decimals after one with them reads its own (floats, as it would have)
    assert values.document(fraction)["update"]["price"] == 1.1


def test_a_dead_letter_of_decode_under_auto_names_the_format_detected_at_routing() -> None:
    hydrator = Hydrator(codec_for("auto"))
    read = Read(record(b'{"after": {"id": 1}, "updated": "not a timestamp"}', key=b"[1]"))
    assert hydrator.route(read) == "[1]"
    step = hydrator.process(None, read, "[1]", 0)
    assert step.dead[0].reason.startswith("auto (cockroachdb): BadInput: 'updated' is")


@pytest.mark.parametrize(
    ("name", "value"), [(name, v) for name, samples in SAMPLES.items() for v in samples]
)
def test_an_engine_step_under_auto_parses_each_value_once(
    name: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses = []
    loads = orjson.loads

    def counted(raw: Any) -> Any:
        parses.append(raw)
        return loads(raw)

    # orjson's, which every parse calls: a compiled caller calls exact.loads directly
    monkeypatch.setattr(orjson, "loads", counted)
    raw = record(value, key=SAMPLE_KEYS[name])
    out = engine_step(Hydrator(codec_for("auto")), None, raw, 0)
    assert not out.dead, out.dead
    assert parses.count(raw.value) == 1


def test_a_decimal_is_read_as_written_under_auto_as_under_its_format() -> None:
    first = b'{"after": {"id": 1, "price": 1.10, "big": 123456789012345678901234567890}, '
    second = b'{"after": {"id": 1, "price": 2.50}, "updated": "2.0"}'
    history = [first + b'"updated": "1.0"}', second]
    for name in ("auto", "cockroachdb"):
        hydrator, state = Hydrator(codec_for(name)), None
        for value in history:
            step = engine_step(hydrator, state, record(value, key=b"[1]"), 0)
            state = step.state
        assert step.emitted[0].value == second[:-1] + (
            b', "before": {"id":1,"price":1.10,"big":123456789012345678901234567890}}'
        )


def test_the_kafka_key_alone_names_state_only_when_every_format_says_so() -> None:
    codec = auto()
    assert codec.key_in_record_key == all(c.key_in_record_key for c in codec.codecs)


def test_encode_hands_the_detected_codec_its_own_envelope_and_can_run_twice() -> None:
    codec = auto()
    event = codec.decode(Read(record(DEBEZIUM_BARE)))
    patch = Patch(after={"doc": "full"})
    first = codec.encode(event, patch)  # type: ignore[arg-type]
    assert codec.encode(event, patch) == first  # type: ignore[arg-type]
    assert orjson.loads(first)["after"] == {"id": 1, "doc": "full"}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), with_schema=st.booleans())
def test_random_debezium_histories_hydrate_under_auto_as_under_debezium(
    data: st.DataObject, with_schema: bool
) -> None:
    model = DebeziumModel(PlaceholderForms(P.encode()), with_schema)
    build_history(data, model)
    outputs = hydrate_log(data, model, Hydrator(codec_for("auto")))
    expected = expected_by_key(model)
    assert outputs.keys() == expected.keys()
    for key, events in expected.items():
        got = outputs[key]
        assert [(e["before"], e["after"]) for e in got] == [
            (e["before"], e["after"]) for e in events
        ]


@pytest.mark.parametrize(
    ("name", "value"), [(name, v) for name, samples in SAMPLES.items() for v in samples]
)
def test_state_tools_under_auto_name_the_state_each_format_keeps(name: str, value: Any) -> None:
    """`hydrator state inspect --key` (default format auto) takes a key as its format spells it:
    the Kafka key, or YDB's `key` array."""
    raw = record(value, key=SAMPLE_KEYS[name])
    key = auto().key(Read(raw))
    if key is None:  # barriers and the like have no state
        return
    spelled = (SAMPLE_KEYS[name] or orjson.dumps(value["key"])).decode()
    assert parse_key(spelled, "auto") == key


def test_a_dead_letter_under_auto_names_the_format_it_was_taken_for() -> None:
    hydrator = Hydrator(codec_for("auto"))
    cockroach_shaped = {"after": {"id": 1}, "updated": "1.0"}
    rec = RawRecord("t", 0, 0, b'{"id": 1}', orjson.dumps(cockroach_shaped))
    routed = hydrator.route(rec)
    assert isinstance(routed, DeadLetter)
    assert routed.reason.startswith("auto (cockroachdb): InvalidKey: key is a JSON object")
