"""Fuzzing the decoders: real-looking Debezium events (keys, values, key-change headers, schema
envelopes), CockroachDB changefeed messages, Debezium Cassandra events and YDB changefeed
records, mutated by hypothesis into hostile shapes — deep nesting, integers of any width, wrong
types, lone surrogates, NaN/Infinity text, empty and garbage bytes — and run through the core
with and without state. No exception may escape, every record must come out as an output, a
dead letter or a counted drop/park, and the resulting state must survive the state codec.

The events and their mutations are in tests/support/hostile_events.py (the Cassandra events in
tests/support/cassandra_model.py, YDB's in hostile_ydb.py); `HYDRATOR_FUZZ_EXAMPLES` sets how
many events each test tries (default: a few seconds' worth).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hydrator import exact
from hydrator.core import DeadLetter, Handoff, HydrationSettings, Hydrator, RawRecord, Transition
from hydrator.core.records import HEADER_SOURCE
from hydrator.formats import codec_for
from state.codec import decode_state, encode_state
from state.record import StateRecord
from tests.support.cassandra_model import TOPIC as CASSANDRA_TOPIC
from tests.support.cassandra_model import fuzz_seed_documents
from tests.support.core import debezium_hydrator, engine_step
from tests.support.hostile_events import (
    FUZZ,
    TOPIC,
    WIDE_INTEGERS,
    P,
    good_record,
    hostile_records,
    key_document,
    mutated,
    serialize,
)
from tests.support.hostile_ydb import TOPIC as YDB_TOPIC
from tests.support.hostile_ydb import good_ydb_record, hostile_ydb_records

SETTINGS = HydrationSettings(max_record_bytes=256 * 1024, max_parked_records=3)
# what a record may end as besides an output or a dead letter: each one counted
COUNTED_ENDS = ("parked", "redelivered_parked", "stale_dropped", "unresolved_dropped")


# -- states the records meet --------------------------------------------------------------------


def states_for(hydrator: Hydrator, key: int) -> list[StateRecord | None]:
    """No state; a row known from an earlier event; a key parked behind a key change."""
    known = engine_step(hydrator, None, good_record(key, "c", 500), 0).state
    oldkey = (("__debezium.oldkey", serialize(key_document(key + 100, False), True)),)
    parked = engine_step(hydrator, None, good_record(key, "u", 501, oldkey), 0).state
    create = engine_step(hydrator, None, good_record(key, "c", 502, oldkey), 0).state
    return [None, known, parked, create]


# -- what must hold ------------------------------------------------------------------------------


def check(
    hydrator: Hydrator,
    record: RawRecord,
    step: Transition,
    rewrite_check: Callable[[bytes | None, bytes], None] | None = None,
) -> None:
    """Nothing vanished; everything that came out can be written; the state can be kept."""
    counted = any(step.counts.get(name) for name in COUNTED_ENDS)
    assert step.emitted or step.dead or counted, (record, step)
    if step.dead:
        assert step.counts.get("dead_letters") == len(step.dead)
    for dead in step.dead:
        assert isinstance(dead, DeadLetter) and dead.reason
        dead.to_output()  # headers encodable
    for output in step.emitted:
        ours = output.headers[-1] == (HEADER_SOURCE, record.source.encode())
        if ours and output.value is not None and output.value != record.value:
            (rewrite_check or assert_exact_rewrite)(record.value, output.value)
    for handoff in step.handoffs:
        assert Handoff.decode(handoff.encode()) == handoff
        hydrator.receive_handoff(None, handoff, 1)
        handoff.new_key.encode()
    if step.state is not None:
        assert decode_state(encode_state(step.state)) == step.state
        later = hydrator.tick(step.state, 10**12)
        if later.state is not None:
            decode_state(encode_state(later.state))


def assert_exact_rewrite(original: bytes | None, rewritten: bytes) -> None:
    """A filled record is the input with columns filled in: every other number exactly as it
    was (no integer turned float)."""
    assert original is not None
    before, after = exact.loads(original), exact.loads(rewritten)
    if "schema" in before and "payload" in before:
        assert after["schema"] == before["schema"]
        before, after = before["payload"], after["payload"]
    for name, value in before.items():
        if name not in ("before", "after"):
            assert after[name] == value and type(after[name]) is type(value)
    for column, value in (before.get("after") or {}).items():
        if after["after"][column] != value:
            assert value in (P, [P], {P: P}), column
        else:
            assert type(after["after"][column]) is type(value)


@FUZZ
@given(hostile_records())
def test_no_hostile_record_escapes_the_core(case: tuple[RawRecord, int]) -> None:
    record, key = case
    hydrator = debezium_hydrator(SETTINGS)
    routed = hydrator.route(record)
    assert routed is None or isinstance(routed, DeadLetter) or routed.encode()
    for state in states_for(hydrator, key):
        step = engine_step(hydrator, state, record, 1)
        check(hydrator, record, step)
        if state is not None and state.is_parked and step.state is not None:
            # the awaited old image arrives: every parked record is replayed
            old = engine_step(hydrator, None, good_record(key + 100, "c", 400), 0).state
            assert old is not None and state.awaiting == f'{{"id":{key + 100}}}'
            new_key = hydrator.route(good_record(key, "c", 1))
            assert isinstance(new_key, str)
            handoff = Handoff(TOPIC, new_key, state.awaiting, old.image, (400,), "t:0:0")
            released = hydrator.receive_handoff(step.state, handoff, 2)
            assert released.counts.get("handoffs_applied") == 1
            check(hydrator, record, released)


JSON_DOCUMENTS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | WIDE_INTEGERS
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(JSON_DOCUMENTS)
def test_json_numbers_survive_exactly(document: Any) -> None:
    written = exact.dumps(document)
    assert exact.loads(written) == document
    assert _types(exact.loads(written)) == _types(document)
    assert exact.loads(json.dumps(document).encode()) == document
    packed, _ = exact.pack(document)
    assert exact.unpack(packed, strict_map_key=False) == document


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {name: _types(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value)


# -- CockroachDB changefeed messages --------------------------------------------------------------

CRDB_ROW = {"id": 1, "region": "eu", "price": "1.10", "qty": 9223372036854775807, "doc": {"n": 1}}


def crdb_value(after: Any, updated: str, diff: bool) -> str:
    """A wrapped message as CockroachDB writes it, DECIMAL `price` as a number."""
    text = json.dumps({"after": after, **({"before": None} if diff else {}), "updated": updated})
    return text.replace('"1.10"', "1.10")


@st.composite
def hostile_changefeed_records(draw: st.DrawFn) -> RawRecord:
    kind = draw(st.sampled_from(["row", "row", "delete", "resolved"]))
    updated = (
        f"{1_700_000_000_000_000_000 + draw(st.integers(-5, 5))}.{draw(st.integers(0, 2)):010d}"
    )
    if kind == "resolved":
        value: Any = {"resolved": updated}
    else:
        after = (
            None if kind == "delete" else {**CRDB_ROW, "qty": draw(st.integers() | WIDE_INTEGERS)}
        )
        value = json.loads(crdb_value(after, updated, draw(st.booleans())))
    key = None if kind == "resolved" and draw(st.booleans()) else draw(mutated([1, "eu"]))
    raw = draw(mutated(value))
    if raw is not None and draw(st.booleans()):
        raw = raw.replace(b'"1.10"', b"1.10")  # a DECIMAL number, where it survived
    return RawRecord("crdb.t", 0, draw(st.integers(0, 10)), key, raw)


def changefeed_states(hydrator: Hydrator) -> list[StateRecord | None]:
    """No state; a row known at an earlier timestamp; a deleted row."""
    row = crdb_value(CRDB_ROW, "1699999999999999990.0000000000", False).encode()
    known = engine_step(hydrator, None, RawRecord("crdb.t", 0, 0, b'[1, "eu"]', row), 0).state
    gone = b'{"after": null, "updated": "1699999999999999991.0000000000"}'
    deleted = engine_step(hydrator, known, RawRecord("crdb.t", 0, 1, b'[1, "eu"]', gone), 0).state
    return [None, known, deleted]


@FUZZ
@given(hostile_changefeed_records())
def test_no_hostile_changefeed_message_escapes_the_core(record: RawRecord) -> None:
    hydrator = Hydrator(codec_for("cockroachdb"), SETTINGS)
    routed = hydrator.route(record)
    assert routed is None or isinstance(routed, DeadLetter) or routed.encode()
    for state in changefeed_states(hydrator):
        step = engine_step(hydrator, state if isinstance(routed, str) else None, record, 1)
        check(hydrator, record, step)
        for output in step.emitted:
            if output.value is not None and output.value != record.value:
                assert record.value is not None
                rewritten = exact.loads(output.value, decimals=True)
                rewritten.pop("before")  # the one member added; the rest as it came
                assert exact.dumps(rewritten) == exact.dumps(
                    exact.loads(record.value, decimals=True)
                )
                assert output.value.startswith(record.value.rstrip()[:-1])


# -- the Cassandra codec ------------------------------------------------------------------------

CASSANDRA_SEEDS = {envelope: fuzz_seed_documents(envelope) for envelope in (False, True)}


@st.composite
def hostile_cassandra_records(draw: st.DrawFn) -> RawRecord:
    """An event of each kind the Cassandra connector writes, mutated."""
    key, value = draw(st.sampled_from(CASSANDRA_SEEDS[draw(st.booleans())]))
    offset = draw(st.integers(0, 10))
    return RawRecord(CASSANDRA_TOPIC, 0, offset, draw(mutated(key)), draw(mutated(value)))


@FUZZ
@given(hostile_cassandra_records())
def test_no_hostile_cassandra_record_escapes_the_core(record: RawRecord) -> None:
    hydrator = Hydrator(codec_for("cassandra"), SETTINGS)
    key, value = CASSANDRA_SEEDS[False][0]
    good = RawRecord(CASSANDRA_TOPIC, 0, 0, exact.dumps(key), exact.dumps(value))
    known = engine_step(hydrator, None, good, 0).state
    for state in (None, known):
        step = engine_step(hydrator, state, record, 1)
        check(hydrator, record, step, rewrite_check=assert_cassandra_rewrite)


def assert_cassandra_rewrite(original: bytes | None, rewritten: bytes) -> None:
    """A filled record is the input with unwritten cells filled in, marked `set: false`; every
    other number exactly as it was."""
    assert original is not None
    before, after = exact.loads(original), exact.loads(rewritten)
    if "schema" in before and "payload" in before:
        assert after["schema"] == before["schema"]
        before, after = before["payload"], after["payload"]
    for name, value in before.items():
        if name != "after":
            assert after[name] == value and type(after[name]) is type(value)
    for column, value in before["after"].items():
        if after["after"][column] != value:
            assert value is None or value["set"] is False, column
            assert after["after"][column]["set"] is False, column
        else:
            assert _types(after["after"][column]) == _types(value)


# -- YDB changefeed records ----------------------------------------------------------------------

YDB_IMAGES = ("oldImage", "newImage")


@FUZZ
@given(hostile_ydb_records())
def test_no_hostile_ydb_record_escapes_the_core(record: RawRecord) -> None:
    hydrator = Hydrator(codec_for("ydb"), SETTINGS)
    routed = hydrator.route(record)
    assert routed is None or isinstance(routed, DeadLetter) or routed.encode()
    known = engine_step(hydrator, None, good_ydb_record(1, 0), 0).state
    erased = engine_step(
        hydrator, known, RawRecord(YDB_TOPIC, 0, 1, None, b'{"key":[1,"eu"],"erase":{}}'), 0
    ).state
    for state in (None, known, erased):
        step = engine_step(hydrator, state, record, 1)
        check(hydrator, record, step, assert_only_images_added)


def assert_only_images_added(original: bytes | None, rewritten: bytes) -> None:
    """A hydrated YDB record is the input's text with `oldImage`/`newImage` added; everything
    else exactly as it was."""
    assert original is not None
    assert rewritten.startswith(original.rstrip(b" \t\n\r")[:-1])
    before, after = exact.loads(original), exact.loads(rewritten)
    assert set(after) - set(before) <= set(YDB_IMAGES)
    for name, value in before.items():
        assert exact.dumps(after[name]) == exact.dumps(value), name
