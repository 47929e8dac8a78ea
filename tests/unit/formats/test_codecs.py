"""Envelope and state codecs: round trips, exact detection, versioning."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgpack
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydrator.core import Handoff, RawRecord
from hydrator.formats.debezium import position
from hydrator.formats.keys import canonical_key
from hydrator.formats.placeholders import PlaceholderForms
from state.codec import FORMAT_V1, FORMAT_V2, StateFormatError, decode_state, encode_state
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step
from tests.support.debezium_model import envelope_schema

P = "__debezium_unavailable_value"
FORMS = PlaceholderForms(P.encode())


def test_canonical_key_is_the_same_for_record_keys_and_headers() -> None:
    enveloped = b'{"schema":{"type":"struct"},"payload":{"b":2,"a":1}}'
    assert canonical_key(enveloped) == canonical_key(b'{"a": 1, "b": 2}') == '{"a":1,"b":2}'


def test_header_keys_with_raw_control_characters_are_read() -> None:
    # SimpleHeaderConverter does not escape them; JsonConverter (the record key) does.
    assert canonical_key(b'{"k":"a\nb"}') == canonical_key(b'{"k":"a\\nb"}')


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (P, {"type": "string"}),
        (FORMS.base64, {"type": "bytes"}),
        ([P], {"type": "array", "items": {"type": "string"}}),
        ([FORMS.base64], {"type": "array", "items": {"type": "bytes"}}),
        (FORMS.byte_ints, {"type": "array", "items": {"type": "int32"}}),
        (FORMS.byte_ints, {"type": "array", "items": {"type": "int64"}}),
        (
            [FORMS.uuid],
            {"type": "array", "items": {"type": "string", "name": "io.debezium.data.Uuid"}},
        ),
        ({P: P}, {"type": "map"}),
        (FORMS.hstore_json, {"type": "string", "name": "io.debezium.data.Json"}),
    ],
)
def test_every_typed_spelling_is_detected_with_and_without_schema(value, field) -> None:
    assert FORMS.matches_schema(value, field)
    assert FORMS.matches_shape(value)


def test_schema_makes_detection_exact() -> None:
    # a text column that happens to hold the base64 spelling is data, not a placeholder
    assert not FORMS.matches_schema(FORMS.base64, {"type": "string"})
    assert not FORMS.matches_schema([P], {"type": "array", "items": {"type": "bytes"}})
    assert not FORMS.matches_schema(FORMS.byte_ints, {"type": "array", "items": {"type": "string"}})
    assert not FORMS.matches_shape("some text") and not FORMS.matches_shape([1, 2])


def test_filled_event_keeps_the_envelope_and_field_order() -> None:
    hydrator = debezium_hydrator()
    schema = envelope_schema()
    key = orjson.dumps({"schema": {"type": "struct"}, "payload": {"id": 1}})
    source = {"version": "3.6", "lsn": 5, "sequence": '[null,"5"]', "extra": [1, 2.5]}
    full = {
        "id": 1,
        "small": 1,
        "txt": "t" * 3000,
        "doc": None,
        "bin": None,
        "tags": None,
        "nums": None,
        "ids": None,
        "attrs": None,
    }
    create = {
        "schema": schema,
        "payload": {
            "before": None,
            "after": full,
            "source": source,
            "op": "c",
            "ts_ms": 7,
            "transaction": None,
        },
    }
    state = engine_step(hydrator, None, RawRecord("t", 0, 0, key, orjson.dumps(create)), 0).state
    update = {
        "schema": schema,
        "payload": {
            "before": None,
            "after": {**full, "txt": P},
            "source": {**source, "lsn": 9, "sequence": '["5","9"]'},
            "op": "u",
            "ts_ms": 8,
            "transaction": None,
        },
    }
    out = engine_step(hydrator, state, RawRecord("t", 0, 1, key, orjson.dumps(update)), 0)
    result = orjson.loads(out.emitted[0].value)
    expected = {**update, "payload": {**update["payload"], "after": full, "before": full}}
    assert result == expected
    assert list(result["payload"]) == list(update["payload"])
    assert list(result["payload"]["after"]) == list(full)


positions = st.none() | st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
images = st.none() | st.dictionaries(st.text(), json_values, max_size=5)
raw_records = st.builds(
    RawRecord,
    st.text(),
    st.integers(0, 1000),
    st.integers(0, 2**62),
    st.none() | st.binary(),
    st.none() | st.binary(),
    st.lists(st.tuples(st.text(), st.none() | st.binary())).map(tuple),
    st.integers(0, 2**62),
)
handoffs = st.builds(
    Handoff, st.text(), st.text(), st.text(), images, positions, st.text(), st.none() | st.binary()
)


state_records = st.builds(
    StateRecord,
    images,
    positions,
    st.booleans(),
    st.integers(0, 2**62),
    st.lists(handoffs, max_size=2).map(tuple),
    st.lists(raw_records, max_size=3).map(tuple),
    st.none() | st.text(),
    st.none() | st.integers(0, 2**62),
)


@given(state_records)
def test_state_record_round_trips(record: StateRecord) -> None:
    data = encode_state(record)
    assert data[0] == FORMAT_V1
    assert decode_state(data) == record


@given(state_records, images, positions, st.booleans(), st.integers(0, 2**62))
def test_a_new_row_keeps_every_other_field(
    record: StateRecord, image: Any, pos: Any, deleted: bool, now_ms: int
) -> None:
    expected = replace(record, image=image, pos=pos, deleted=deleted, updated_at_ms=now_ms)
    assert record.with_row(image, pos, deleted, now_ms) == expected


wide_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(), wide_values, max_size=5), st.integers())
def test_state_holds_integers_of_any_width(image: dict[str, Any], number: int) -> None:
    image = {**image, "n": number}
    record = StateRecord(image=image)
    handoff = Handoff("t", "new", "old", image, None, "t:0:1")
    data = encode_state(StateRecord(image=image, handoffs=(handoff,)))
    wide = any(not -(2**63) <= n < 2**64 for n in _integers(image))
    assert data[0] == (FORMAT_V2 if wide else FORMAT_V1)
    assert decode_state(data) == StateRecord(image=image, handoffs=(handoff,))
    assert Handoff.decode(handoff.encode()) == handoff
    assert decode_state(encode_state(record)).image == image


def _integers(value: Any) -> list[int]:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [n for item in value for n in _integers(item)]
    return [value] if type(value) is int else []


def test_state_written_by_the_previous_release_is_read() -> None:
    """Format 1 as the release before wide integers wrote it: plain msgpack."""
    old_handoff = msgpack.packb([1, "t", "n", "o", {"a": 1}, [5], "t:0:1", None], use_bin_type=True)
    body = [{"a": 1}, [7], False, 123, [old_handoff], [["t", 0, 4, b"k", b"v", [["h", b"x"]], 9]]]
    data = bytes([FORMAT_V1]) + msgpack.packb([*body, "o", 100], use_bin_type=True)
    state = decode_state(data)
    assert state.image == {"a": 1} and state.pos == (7,) and state.updated_at_ms == 123
    assert state.handoffs[0].pos == (5,) and state.parked[0].headers == (("h", b"x"),)


# Written by the release before per-cell write times (commit 16e3db5), with wide integers,
# a pending handoff and a parked record; and a plain tombstone.
BEFORE_CELL_TIMES = (
    "029883a2696401a3626967a57878787878a16ec7160131313830353931363230373137343131333033343234920709"
    "c2cd04d291c4359801a3726177a87b226964223a327da87b226964223a317d82a2696401a176a1619105a77261773a"
    "303a33c4087b226964223a327d9197a37261770004c4087b226964223a327dc4027b7d9192a168c4017663a87b2269"
    "64223a317d32"
)
TOMBSTONE_BEFORE_CELL_TIMES = "0198c09103c34d9090c0c0"


def test_state_written_before_cell_times_is_read_and_written_the_same() -> None:
    data = bytes.fromhex(BEFORE_CELL_TIMES)
    state = decode_state(data)
    assert state.image == {"id": 1, "big": "xxxxx", "n": 2**70} and state.pos == (7, 9)
    assert state.updated_at_ms == 1234 and state.cell_times is None
    (handoff,) = state.handoffs
    assert handoff.old_key == '{"id":1}' and handoff.image == {"id": 1, "v": "a"}
    assert state.parked[0].headers == (("h", b"v"),) and state.awaiting == '{"id":1}'
    assert encode_state(state) == data  # state without cell times keeps its bytes
    tombstone = bytes.fromhex(TOMBSTONE_BEFORE_CELL_TIMES)
    assert decode_state(tombstone) == StateRecord(pos=(3,), deleted=True, updated_at_ms=77)
    assert encode_state(decode_state(tombstone)) == tombstone


@given(state_records, st.dictionaries(st.text(), st.integers(-(2**63), 2**63 - 1), max_size=4))
def test_cell_times_round_trip(record: StateRecord, times: dict[str, int]) -> None:
    record = replace(record, cell_times=times)
    assert decode_state(encode_state(record)) == record


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x09abc",
        b"\x01\xc1",
        b"\x01" + msgpack.packb([1, 2]),
        b"\x01" + msgpack.packb([None, None, False, 0, [b"xx"], [], None, None]),
        b"\x01" + msgpack.packb([None, None, False, 0, [], [[1]], None, None]),
        b"\x02" + msgpack.packb([msgpack.ExtType(9, b"x")] + [None] * 7),
        b"\x02" + msgpack.packb([msgpack.ExtType(1, b"x1")] + [None] * 7),
        b"\x01" + msgpack.packb([None, 5, False, 0, [], [], None, None]),
        b"\x01" + msgpack.packb([None, None, False, 0, [], [], None, None, {}, 1]),
        b"\x01" + msgpack.packb({"image": None}),
    ],
)
def test_unreadable_state_bytes_raise_a_clear_error(data: bytes) -> None:
    with pytest.raises(StateFormatError):
        decode_state(data)


@given(
    st.one_of(st.none(), st.integers(0, 2**64 - 1), st.text(alphabet="0123456789", max_size=3)),
    st.one_of(st.none(), st.integers(0, 2**64 - 1)),
    st.booleans(),
)
def test_a_postgres_sequence_reads_the_same_with_or_without_the_json_parser(
    last_commit: Any, lsn: Any, as_strings: bool
) -> None:
    # the two-decimal-strings form Debezium writes is read without orjson; every form gives
    # what the JSON reading gives
    def spelled(part: Any) -> Any:
        return str(part) if as_strings and isinstance(part, int) else part

    sequence = orjson.dumps([spelled(last_commit), spelled(lsn)]).decode()
    parsed = orjson.loads(sequence)
    expected = (int(parsed[0] or 0), int(parsed[1] or 0))
    assert position({"sequence": sequence}) == expected
