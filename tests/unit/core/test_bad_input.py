"""Rule 8: malformed records end as a dead letter with a clear reason; none raises."""

from __future__ import annotations

import msgpack
import orjson
import pytest

from hydrator.core import DeadLetter, Handoff, HydrationSettings, Hydrator, RawRecord, Read
from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from state.codec import decode_state, encode_state
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step

KEY = b'{"id":1}'
GOOD_AFTER = {"id": 1, "v": "x"}


def event(**payload: object) -> bytes:
    return orjson.dumps({"before": None, "after": GOOD_AFTER, "source": {}, "op": "c", **payload})


def with_schema(after_columns: object, after: object = GOOD_AFTER) -> bytes:
    """A schema envelope whose `after` field has these column schemas."""
    schema = {
        "type": "struct",
        "fields": [
            {"field": "before", "type": "struct", "fields": []},
            {"field": "after", "type": "struct", "fields": after_columns},
        ],
    }
    payload = {"before": None, "after": after, "source": {}, "op": "c"}
    return orjson.dumps({"schema": schema, "payload": payload})


WIDE = 123456789012345678901234567890  # wider than 64 bits
DEEP = b"[" * 1000  # the stdlib parser runs out of stack


BAD_RECORDS: list[tuple[str, bytes | None, bytes | None, tuple, str]] = [
    # (case, key, value, headers, expected reason fragment)
    ("value not JSON", KEY, b"{not json", (), "value is not JSON"),
    ("value invalid UTF-8", KEY, b'{"op":"\xff\xfe"}', (), "value is not JSON"),
    ("value empty", KEY, b"", (), "value is not JSON"),
    ("value NaN", KEY, b'{"op":"c","after":{"x":NaN}}', (), "value is not JSON"),
    ("value a JSON array", KEY, b"[1,2]", (), "JSON list, not an object"),
    ("value a JSON string", KEY, b'"hello"', (), "JSON str, not an object"),
    ("no op field", KEY, orjson.dumps({"before": None, "after": GOOD_AFTER}), (), "no 'op'"),
    ("unknown op", KEY, event(op="x"), (), "unknown op 'x'"),
    ("op not a string", KEY, event(op=3), (), "unknown op 3"),
    ("op a JSON list", KEY, event(op=["t"]), (), "unknown op ['t']"),
    ("op null", KEY, event(op=None), (), "unknown op None"),
    ("create without after", KEY, event(after=None), (), "without an 'after'"),
    ("update without after", KEY, event(op="u", after=None), (), "without an 'after'"),
    ("after not an object", KEY, event(after=[1]), (), "'after' is a JSON list"),
    ("before not an object", KEY, event(op="u", before="x"), (), "'before' is a JSON str"),
    ("delete with after", KEY, event(op="d", before=None), (), "op 'd' with an 'after'"),
    (
        "schema envelope, payload not object",
        KEY,
        orjson.dumps({"schema": {}, "payload": 5}),
        (),
        "payload is not an object",
    ),
    (
        "schema envelope, schema not object",
        KEY,
        orjson.dumps({"schema": 5, "payload": {"op": "c", "after": GOOD_AFTER}}),
        (),
        "schema is not an object",
    ),
    (
        "schema without after field",
        KEY,
        orjson.dumps({"schema": {"fields": []}, "payload": {"op": "c", "after": GOOD_AFTER}}),
        (),
        "schema has no 'before'",
    ),
    (
        "malformed source.sequence",
        KEY,
        event(source={"sequence": '["a","b"]'}),
        (),
        "source position is malformed",
    ),
    (
        "source.sequence not a pair",
        KEY,
        event(source={"sequence": "[1,2,3]"}),
        (),
        "source position is malformed",
    ),
    (
        "source.lsn not a number",
        KEY,
        event(source={"lsn": "abc"}),
        (),
        "source position is malformed",
    ),
    ("key not JSON", b"id=1", event(), (), "key is not JSON"),
    ("key JSON null", b"null", event(), (), "key is JSON null"),
    (
        "oldkey header not JSON",
        KEY,
        event(),
        (("__debezium.oldkey", b"{id:2"),),
        "header __debezium.oldkey: key is not JSON",
    ),
    (
        "newkey header empty",
        KEY,
        event(op="d", before={"id": 1}, after=None),
        (("__debezium.newkey", b""),),
        "header __debezium.newkey",
    ),
    (
        "value over the size limit",
        KEY,
        event(after={"id": 1, "v": "x" * 2000}),
        (),
        "over the 1024-byte limit",
    ),
    # shapes found by fuzzing: each crashed an engine before
    ("key nested 1000 deep", DEEP, event(), (), "InvalidKey: key is not JSON"),
    (
        "oldkey header nested 1000 deep",
        KEY,
        event(),
        (("__debezium.oldkey", DEEP),),
        "header __debezium.oldkey: key is not JSON",
    ),
    ("key with a lone surrogate", b'{"id":"\\ud800"}', event(), (), "surrogates not allowed"),
    (
        "schema fields a number",
        KEY,
        orjson.dumps({"schema": {"fields": 5}, "payload": {"op": "c", "after": GOOD_AFTER}}),
        (),
        "TypeError: ",
    ),
    (
        "schema column name a list",
        KEY,
        with_schema([{"field": ["id"], "type": "int32"}]),
        (),
        "TypeError: ",
    ),
    (
        "schema column name an object",
        KEY,
        with_schema([{"field": {"a": 1}, "type": "int32"}]),
        (),
        "TypeError: ",
    ),
    (
        "schema array items a string",
        KEY,
        with_schema(
            [{"field": "id", "type": "int32"}, {"field": "v", "type": "array", "items": "x"}],
            {"id": 1, "v": ["__debezium_unavailable_value"]},
        ),
        (),
        "AttributeError: ",
    ),
    (
        "source.lsn wider than 64 bits",
        KEY,
        event(source={"lsn": "1" * 30}),
        (),
        "source position out of range",
    ),
    (
        "source.lsn a JSON number wider than 64 bits",
        KEY,
        event(after={"id": 1}).replace(b'"source":{}', b'"source":{"lsn":' + b"9" * 30 + b"}"),
        (),
        "source position out of range",
    ),
    (
        "source.sequence wider than 64 bits",
        KEY,
        event(source={"sequence": f'["{"2" * 30}","{"3" * 30}"]'}),
        (),
        "source position out of range",
    ),
    (
        "key over the size limit",
        b'{"id":"' + b"k" * 2000 + b'"}',
        event(),
        (),
        "key is 2009 bytes, over the 1024-byte limit",
    ),
]


@pytest.mark.parametrize(
    ("key", "value", "headers", "reason"),
    [case[1:] for case in BAD_RECORDS],
    ids=[case[0] for case in BAD_RECORDS],
)
def test_bad_record_becomes_a_dead_letter(
    key: bytes, value: bytes, headers: tuple, reason: str
) -> None:
    hydrator = debezium_hydrator(HydrationSettings(max_record_bytes=1024))
    record = RawRecord("raw", 3, 42, key, value, headers)
    routed = hydrator.route(record)
    transition = engine_step(hydrator, None, record, 0)
    assert not transition.emitted
    assert len(transition.dead) == 1, transition
    dead = transition.dead[0]
    assert reason in dead.reason
    assert dead.record is record
    assert transition.counts["dead_letters"] == 1
    if isinstance(routed, DeadLetter):
        assert routed.reason == dead.reason
    output = dead.to_output()
    assert output.value == value and output.key == key and output.partition == 3
    names = dict(output.headers)
    assert names[HEADER_ERROR] == dead.reason.encode()
    assert names[HEADER_SOURCE] == b"raw:3:42"


def test_there_are_this_many_kinds() -> None:
    # docs/testing.md counts them
    assert len(BAD_RECORDS) == 38


def test_bad_record_leaves_state_untouched() -> None:
    hydrator = debezium_hydrator()
    good = engine_step(hydrator, None, RawRecord("raw", 0, 0, KEY, event()), 0).state
    after_bad = engine_step(hydrator, good, RawRecord("raw", 0, 1, KEY, b"garbage"), 5)
    assert after_bad.state == good


# -- whatever a record raises, it is a dead letter ------------------------------------------------


class _Exploding:
    """A codec whose key or decode fails in a way nobody foresaw."""

    name = "exploding"
    key_in_record_key = False

    def __init__(self, in_key: bool = False) -> None:
        self.in_key = in_key

    def accepts(self, document: object) -> bool:
        return True

    def key(self, read: Read) -> str:
        if self.in_key:
            raise IndexError("a key nobody foresaw")
        return '{"id":1}'

    def decode(self, read: Read) -> object:
        raise KeyError("a shape nobody foresaw")

    def encode(self, event: object, patch: object) -> bytes:
        raise AssertionError


def test_any_exception_from_a_record_is_a_dead_letter_naming_it() -> None:
    hydrator = Hydrator(_Exploding())  # type: ignore[arg-type]
    good = engine_step(debezium_hydrator(), None, RawRecord("raw", 0, 0, KEY, event()), 0).state
    out = engine_step(hydrator, good, RawRecord("raw", 0, 1, KEY, event()), 5)
    assert out.state is good and not out.emitted
    assert [d.reason for d in out.dead] == ["exploding: KeyError: 'a shape nobody foresaw'"]


def test_any_exception_from_a_key_is_a_dead_letter_naming_it() -> None:
    hydrator = Hydrator(_Exploding(in_key=True))  # type: ignore[arg-type]
    routed = hydrator.route(RawRecord("raw", 0, 1, None, event()))
    assert isinstance(routed, DeadLetter)
    assert routed.reason == "exploding: IndexError: a key nobody foresaw"


def test_an_unreadable_handoff_is_a_dead_letter() -> None:
    hydrator = debezium_hydrator()
    good = engine_step(
        hydrator, None, RawRecord("raw", 0, 0, KEY, event(source={"lsn": 5})), 0
    ).state
    # a position no rule can compare with the key's
    hostile = Handoff("raw", '{"id":1}', '{"id":0}', None, ("a",), "raw:1:7")
    out = hydrator.receive_handoff(good, hostile, 5)
    assert out.state is good and len(out.dead) == 1
    assert out.dead[0].reason.startswith("TypeError: ")
    assert dict(out.dead[0].to_output().headers)["hydrator.handoff.source"] == b"raw:1:7"


def test_a_tick_that_fails_dead_letters_what_was_parked() -> None:
    hydrator = debezium_hydrator(HydrationSettings(handoff_timeout_ms=10))
    # a parked record whose key does not decode (a state written by something else): the
    # timeout cannot release it under its key
    parked = RawRecord("raw", 0, 3, b"not a key", event())
    state = StateRecord(parked=(parked,), awaiting="k", waiting_since_ms=0)
    out = hydrator.tick(state, 100)
    assert [d.record for d in out.dead] == [parked]
    assert out.state is not None and not out.state.is_waiting


# -- numbers are exact ----------------------------------------------------------------------------


def test_integers_wider_than_64_bits_survive_in_values() -> None:
    hydrator = debezium_hydrator()
    first = event(after={"id": 1, "v": "x", "big": 0}).replace(b'"big":0', b'"big":%d' % WIDE)
    state = engine_step(hydrator, None, RawRecord("raw", 0, 0, KEY, first), 0).state
    assert state.image["big"] == WIDE
    update = event(op="u", after={"id": 1, "v": "__debezium_unavailable_value", "big": 0})
    update = update.replace(b'"big":0', b'"big":-%d' % WIDE)
    out = engine_step(hydrator, state, RawRecord("raw", 0, 1, KEY, update), 1)
    (emitted,) = out.emitted
    assert b'"big":-%d' % WIDE in emitted.value  # rewritten (filled), still exact
    assert b'"before":{"id":1,"v":"x","big":%d}' % WIDE in emitted.value
    assert decode_state(encode_state(out.state)) == out.state


def test_keys_with_wide_integers_keep_distinct_states() -> None:
    hydrator = debezium_hydrator()
    one, two = (b'{"id":%d}' % (WIDE + n) for n in (1, 2))
    assert hydrator.route(RawRecord("raw", 0, 0, one, None)) != hydrator.route(
        RawRecord("raw", 0, 0, two, None)
    )
    assert hydrator.route(RawRecord("raw", 0, 0, one, None)) == f'{{"id":{WIDE + 1}}}'


# -- parked records are capped ---------------------------------------------------------------------


def _parked_key(settings: HydrationSettings) -> tuple[Hydrator, StateRecord]:
    """A CREATE from a key change (its old image not here yet) parks the new key."""
    hydrator = debezium_hydrator(settings)
    create = event(after={"id": 1, "v": "__debezium_unavailable_value"}, source={"lsn": 10})
    headers = (("__debezium.oldkey", b'{"id":0}'),)
    out = engine_step(hydrator, None, RawRecord("raw", 0, 0, KEY, create, headers), 0)
    assert out.state.is_parked
    return hydrator, out.state


def test_parked_records_are_capped_by_count() -> None:
    hydrator, state = _parked_key(HydrationSettings(max_parked_records=3))
    results = []
    for offset in range(1, 5):
        update = event(op="u", source={"lsn": 10 + offset})
        out = engine_step(hydrator, state, RawRecord("raw", 0, offset, KEY, update), 0)
        state = out.state
        results.append(out)
    assert len(state.parked) == 3
    assert [len(r.dead) for r in results] == [0, 0, 1, 1]
    assert "3 wait already, at most 3" in results[-1].dead[0].reason
    assert results[-1].counts == {"dead_letters": 1, "parked_overflow": 1}


def test_parked_records_are_capped_by_bytes_and_record_size() -> None:
    hydrator, state = _parked_key(HydrationSettings(max_parked_bytes=600, max_record_bytes=500))
    small = event(op="u", source={"lsn": 11})
    out = engine_step(hydrator, state, RawRecord("raw", 0, 1, KEY, small), 0)
    assert not out.dead and len(out.state.parked) == 2
    medium = event(op="u", after={"id": 1, "v": "m" * 400}, source={"lsn": 12})
    out = engine_step(hydrator, out.state, RawRecord("raw", 0, 2, KEY, medium), 0)
    assert "over the 600-byte limit" in out.dead[0].reason
    # the record size limit holds for parked records too
    large = event(op="u", after={"id": 1, "v": "l" * 600}, source={"lsn": 13})
    out = engine_step(hydrator, out.state, RawRecord("raw", 0, 3, KEY, large), 0)
    assert "over the 500-byte limit" in out.dead[0].reason and len(out.state.parked) == 2


@pytest.mark.parametrize(
    "body",
    [
        [1, "raw", '{"id":1}', '{"id":0}', None, ["a"], "raw:1:7", None],
        [1, "raw", '{"id":1}', 5, None, None, "raw:1:7", None],
        [1, "raw", '{"id":1}', '{"id":0}', [1], None, "raw:1:7", None],
        [1, "raw", '{"id":1}', '{"id":0}', None, None, "raw:1:7", "not bytes"],
        [1, "raw"],
        "not a list",
    ],
)
def test_handoff_bytes_of_the_wrong_shape_do_not_decode(body: object) -> None:
    with pytest.raises(ValueError):
        Handoff.decode(msgpack.packb(body, use_bin_type=True))


def test_a_reason_quoting_the_record_is_short_and_always_writable() -> None:
    hydrator = debezium_hydrator()
    hydrator.codec = _Exploding()  # type: ignore[assignment]
    hydrator.codec.decode = lambda record: {}["\ud800" * 5000]  # type: ignore[method-assign]
    (dead,) = engine_step(hydrator, None, RawRecord("raw", 0, 1, KEY, event()), 5).dead
    assert len(dead.reason) == 1000 and dead.reason.startswith("exploding: KeyError: ")
    assert dict(dead.to_output().headers)[HEADER_ERROR].startswith(b"exploding: KeyError: '\\ud800")


@pytest.mark.parametrize("value", [None, b"", b"\xc1", msgpack.packb([9, "t"]), DEEP])
def test_an_unreadable_handoff_record_is_a_dead_letter(value: bytes | None) -> None:
    from hydrator.core.hydrator import read_handoff

    record = RawRecord("app-handoff", 0, 7, b"t\x00k", value)
    dead = read_handoff(record)
    assert isinstance(dead, DeadLetter)
    assert dead.record is record
    assert dead.reason.startswith("unreadable handoff: ")


def test_a_handoff_record_reads_back() -> None:
    from hydrator.core.hydrator import read_handoff

    handoff = Handoff("t", '{"id":2}', '{"id":1}', {"id": 1, "v": "x"}, (1, 2), "t:0:3")
    assert read_handoff(RawRecord("app-handoff", 0, 7, None, handoff.encode())) == handoff
