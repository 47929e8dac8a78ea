"""`--format ydb`: YDB changefeed records (FORMAT = 'JSON') in the shapes YDB's documentation
and its changefeed serializer give, hydrated into the images NEW_AND_OLD_IMAGES carries; bad
records end as dead letters with a reason."""

from __future__ import annotations

from typing import Any

import pytest

from hydrator import exact
from hydrator.cli import FORMATS
from hydrator.core import DeadLetter, HydrationSettings, Hydrator, RawRecord, Read, Transition
from hydrator.core.records import HEADER_FILLED
from hydrator.engines.spark.routing import KEYLESS, group_of
from hydrator.formats import codec_for
from hydrator.formats.ydb import YdbCodec
from state.record import StateRecord
from tests.support.core import engine_step

TOPIC = "ydb.orders.feed"
U64 = 2**64 - 1
WIDE = 123456789012345678901234567890


def ydb_hydrator(settings: HydrationSettings | None = None) -> Hydrator:
    return Hydrator(codec_for("ydb"), settings)


class Feed:
    """One key's records through the core, state carried from one to the next."""

    def __init__(self, settings: HydrationSettings | None = None) -> None:
        self.hydrator = ydb_hydrator(settings)
        self.states: dict[str | None, StateRecord | None] = {}
        self.offset = 0

    def step(self, value: Any, kafka_key: bytes | None = None) -> Transition:
        raw = value if isinstance(value, bytes) or value is None else exact.dumps(value)
        self.offset += 1
        record = RawRecord(TOPIC, 0, self.offset, kafka_key, raw)
        key = self.hydrator.route(record)
        assert not isinstance(key, DeadLetter), key.reason
        step = engine_step(self.hydrator, self.states.get(key), record, 0)
        if key is not None:
            self.states[key] = step.state
        return step

    def out(self, value: Any, kafka_key: bytes | None = None) -> dict[str, Any]:
        step = self.step(value, kafka_key)
        assert not step.dead, step.dead[0].reason
        (emitted,) = step.emitted
        return exact.loads(emitted.value)


# -- the documentation's and the seed's shapes ------------------------------------------------


def test_an_update_of_a_new_row_gains_its_new_image() -> None:
    record = {"key": [1, "one"], "update": {"payload": "lorem ipsum", "date": "2022-02-22"}}
    out = Feed().out(record)
    assert out == {**record, "newImage": {"payload": "lorem ipsum", "date": "2022-02-22"}}


def test_updates_gain_the_stored_row_as_old_image_and_the_merged_row_as_new_image() -> None:
    feed = Feed()
    feed.out({"key": [1, "one"], "update": {"payload": "lorem ipsum", "date": "2022-02-22"}})
    update = {
        "key": [1, "one"],
        "update": {"date": "2022-12-12"},
        "ts": [1670792400890, 562949953607163],
    }
    step = feed.step(update)
    assert dict(step.emitted[0].headers)[HEADER_FILLED] == b"payload"
    assert exact.loads(step.emitted[0].value) == {
        **update,
        "oldImage": {"payload": "lorem ipsum", "date": "2022-02-22"},
        "newImage": {"payload": "lorem ipsum", "date": "2022-12-12"},
    }


def test_json_null_is_a_value() -> None:
    feed = Feed()
    feed.out({"key": [1], "update": {"a": "x", "b": "y"}})
    assert feed.out({"key": [1], "update": {"a": None}})["newImage"] == {"a": None, "b": "y"}


def test_a_reset_nulls_every_stored_column_it_does_not_name() -> None:
    feed = Feed()
    feed.out({"key": [7], "update": {"a": 1, "b": 2, "c": 3}})
    out = feed.out({"key": [7], "reset": {"b": 20}})
    assert out["oldImage"] == {"a": 1, "b": 2, "c": 3}
    assert out["newImage"] == {"a": None, "b": 20, "c": None}
    assert feed.out({"key": [7], "update": {"c": 30}})["newImage"] == {
        "a": None,
        "b": 20,
        "c": 30,
    }


def test_an_erase_gains_the_old_image_and_no_new_image() -> None:
    feed = Feed()
    feed.out({"key": [2, "two"], "update": {"v": "x"}})
    assert feed.out({"key": [2, "two"], "erase": {}}) == {
        "key": [2, "two"],
        "erase": {},
        "oldImage": {"v": "x"},
    }


def test_an_erase_of_an_unknown_row_passes_unchanged() -> None:
    raw = b'{"key":[2,"two"],"erase":{}}'
    step = Feed().step(raw)
    assert step.emitted[0].value == raw and step.counts == {"events": 1, "filled_columns": 0}


def test_a_row_erased_and_written_again_starts_afresh() -> None:
    feed = Feed()
    feed.out({"key": [3], "update": {"a": 1, "b": 2}})
    feed.out({"key": [3], "erase": {}})
    out = feed.out({"key": [3], "update": {"a": 5}})
    assert "oldImage" not in out and out["newImage"] == {"a": 5}


def test_a_record_with_both_images_passes_unchanged_byte_for_byte() -> None:
    raw = (
        b'{"key":[1,2,3],"update":{},"newImage":{"textColumn":"value1","intColumn":101,'
        b'"boolColumn":true},"oldImage":{"textColumn":null,"intColumn":100,"boolColumn":false}}'
    )
    step = Feed().step(raw)
    assert step.emitted[0].value == raw


def test_new_image_mode_keeps_its_new_image_and_gains_the_old_one() -> None:
    feed = Feed()
    first = {"key": [1], "update": {}, "newImage": {"a": 1, "b": 2}}
    assert feed.out(first) == first
    second = {"key": [1], "update": {}, "newImage": {"a": 1, "b": 3}}
    assert feed.out(second) == {**second, "oldImage": {"a": 1, "b": 2}}
    # the shipped image is the truth the next change is applied to
    assert feed.out({"key": [1], "update": {"a": 9}})["newImage"] == {"a": 9, "b": 3}


def test_a_shipped_new_image_is_kept_even_where_state_disagrees() -> None:
    feed = Feed()
    feed.out({"key": [1], "update": {"a": 1}})
    record = {"key": [1], "update": {}, "newImage": {"a": 2, "z": None}}
    assert feed.out(record)["newImage"] == {"a": 2, "z": None}


def test_old_image_mode_changes_pass_unchanged() -> None:
    """OLD_IMAGE ships no new values (`update` is an empty flag): no new image is made up."""
    feed = Feed()
    feed.out({"key": [1], "update": {"a": 1}})
    raw = b'{"key":[1],"update":{},"oldImage":{"a":1}}'
    step = feed.step(raw)
    assert step.emitted[0].value == raw and step.counts == {"passthrough": 1}


def test_keys_only_mode_cannot_tell_what_changed() -> None:
    """KEYS_ONLY's `update: {}` reads as an UPSERT naming no column: the row as stored."""
    feed = Feed()
    feed.out({"key": [1], "update": {"a": 1}})
    assert feed.out({"key": [1], "update": {}})["newImage"] == {"a": 1}


def test_a_new_row_written_in_part_shows_only_the_columns_named() -> None:
    """An UPSERT creating a row leaves its other columns NULL, but the changefeed never names
    them and no earlier record did: the new image has the columns written."""
    assert Feed().out({"key": [1], "update": {"a": 1}})["newImage"] == {"a": 1}


def test_no_fill_before_leaves_out_the_old_image() -> None:
    feed = Feed(HydrationSettings(fill_before=False))
    feed.out({"key": [1], "update": {"a": 1, "b": 2}})
    out = feed.out({"key": [1], "update": {"a": 5}})
    assert "oldImage" not in out and out["newImage"] == {"a": 5, "b": 2}
    assert feed.out({"key": [1], "erase": {}}) == {"key": [1], "erase": {}}


# -- virtual timestamps are not positions ------------------------------------------------------


def test_equal_virtual_timestamps_are_separate_changes() -> None:
    """YDB can merge consecutive transactions on a row under one timestamp (issue #9901)."""
    feed = Feed()
    ts = [1670792400890, 562949953607163]
    feed.out({"key": [123], "update": {"val": 0}, "ts": ts})
    assert feed.out({"key": [123], "update": {"val": 1}, "ts": ts})["newImage"] == {"val": 1}
    assert feed.out({"key": [123], "update": {"val": 2}, "ts": [1, 1]})["newImage"] == {"val": 2}


def test_identical_consecutive_records_are_both_hydrated() -> None:
    feed = Feed()
    feed.out({"key": [1], "update": {"n": 0, "other": "x"}})
    record = {"key": [1], "update": {"n": 5}, "ts": [10, 20]}
    first, second = feed.out(record), feed.out(record)
    assert first["oldImage"] == {"n": 0, "other": "x"}
    assert second["oldImage"] == second["newImage"] == {"n": 5, "other": "x"}


# -- identity ----------------------------------------------------------------------------------


def test_identity_is_the_key_array_not_the_kafka_key() -> None:
    codec = YdbCodec()
    record = RawRecord(TOPIC, 0, 0, None, b'{"key":[1, "one"],"update":{}}')
    assert codec.key(Read(record)) == '[1,"one"]'
    keyed = RawRecord(TOPIC, 0, 0, b'{"payload":{"id":9}}', record.value)
    assert codec.key(Read(keyed)) == '[1,"one"]'
    assert codec.key(Read(RawRecord(TOPIC, 0, 0, None, b'{"key":["one",1],"update":{}}'))) == (
        '["one",1]'
    )


def test_a_null_kafka_key_is_routed_by_the_value_in_both_engines() -> None:
    hydrator = ydb_hydrator()
    record = RawRecord(TOPIC, 2, 0, None, b'{"key":[5],"update":{"a":1}}')
    assert hydrator.route(record) == "[5]"
    assert group_of(hydrator, record) == f"{TOPIC}\x00[5]"
    barrier = RawRecord(TOPIC, 2, 1, None, b'{"resolved":[1,2]}')
    assert hydrator.route(barrier) is None
    assert group_of(hydrator, barrier).startswith(KEYLESS)


def test_keys_differing_beyond_64_bits_keep_distinct_rows() -> None:
    feed = Feed()
    feed.out({"key": [WIDE], "update": {"a": 1}})
    out = feed.out({"key": [WIDE + 1], "update": {"b": 2}})
    assert "oldImage" not in out and out["newImage"] == {"b": 2}
    assert feed.states.keys() == {f"[{WIDE}]", f"[{WIDE + 1}]"}


def test_barriers_schema_changes_and_kafka_tombstones_pass_unchanged() -> None:
    feed = Feed()
    for raw in (
        b'{"resolved":[1670792400890,562949953607163]}',
        b'{"tableChanges":[{"table":{"schemaVersion":2}}],"ts":[1,2]}',
        None,
    ):
        step = feed.step(raw)
        assert step.emitted[0].value == raw and step.counts == {"passthrough": 1}
    assert feed.states == {}


# -- exact numbers -----------------------------------------------------------------------------


def test_64_bit_integers_decimals_and_wide_json_integers_survive_exactly() -> None:
    feed = Feed()
    raw = (
        b'{"key":[18446744073709551615,-9223372036854775808],"update":{"u":18446744073709551615,'
        b'"i":-9223372036854775808,"d":"12345678901234567890.1234567890",'
        b'"j":{"n":123456789012345678901234567890}}}'
    )
    feed.step(raw)
    out = feed.step(
        b'{"key":[18446744073709551615,-9223372036854775808],"update":{"x":0.1}}'
    ).emitted[0]
    text = out.value.decode()
    for digits in (
        '"u":18446744073709551615',
        '"i":-9223372036854775808',
        '"d":"12345678901234567890.1234567890"',
        '"n":123456789012345678901234567890',
        '"x":0.1',
    ):
        assert text.count(digits) == 2, digits  # in oldImage/update and in newImage
    assert exact.loads(out.value)["key"] == [U64, -(2**63)]


def test_the_input_text_stays_byte_for_byte_and_doubles_keep_their_17_digits() -> None:
    feed = Feed()
    feed.step(b'{"key":[1],"update":{"r":0.10000000000000001,"n":"x"}}')
    raw = b'{"key": [1], "update": {"r": 1.0000000000000002E-7},  "ts": [3, 4]}\n'
    out = feed.step(raw).emitted[0].value
    assert out.startswith(raw.rstrip()[:-1] + b",")
    assert out.endswith(
        b'"oldImage":{"r":0.10000000000000001,"n":"x"},'
        b'"newImage":{"r":1.0000000000000002E-7,"n":"x"}}'
    )


# -- bad input ---------------------------------------------------------------------------------

BAD_RECORDS: list[tuple[str, bytes, str]] = [
    ("not JSON", b'{"key":[1],', "BadInput: value is not JSON"),
    ("invalid UTF-8", b'{"key":["\xff"],"update":{}}', "BadInput: value is not JSON"),
    ("NaN", b'{"key":[1],"update":{"x":NaN}}', "BadInput: value is not JSON"),
    ("empty", b"", "BadInput: value is not JSON"),
    ("an array", b"[1,2]", "not an object"),
    ("a string", b'"update"', "not an object"),
    ("no operation", b'{"key":[1],"newImage":{}}', "none of 'update', 'reset', 'erase'"),
    ("an empty object", b"{}", "none of 'update', 'reset', 'erase'"),
    ("two operations", b'{"key":[1],"update":{},"erase":{}}', "['update', 'erase']"),
    ("three operations", b'{"key":[1],"update":{},"reset":{},"erase":{}}', "one operation"),
    ("no key", b'{"update":{"a":1}}', "InvalidKey: a YDB change record without 'key'"),
    ("key an object", b'{"key":{"id":1},"update":{}}', "InvalidKey: 'key' is a JSON object"),
    ("key a number", b'{"key":1,"update":{}}', "InvalidKey: 'key' is a JSON number"),
    ("key null", b'{"key":null,"erase":{}}', "InvalidKey: 'key' is a JSON null"),
    ("key empty", b'{"key":[],"update":{}}', "InvalidKey: 'key' is an empty array"),
    ("a lone surrogate", b'{"key":["\\ud800"],"update":{}}', "BadInput: value is not JSON"),
    ("update an array", b'{"key":[1],"update":[1]}', "'update' is a JSON array"),
    ("reset a string", b'{"key":[1],"reset":"x"}', "'reset' is a JSON string"),
    ("update null", b'{"key":[1],"update":null}', "'update' is a JSON null"),
    ("erase with columns", b'{"key":[1],"erase":{"a":1}}', "'erase' is not empty"),
    ("erase true", b'{"key":[1],"erase":true}', "'erase' is a JSON boolean"),
    ("newImage an array", b'{"key":[1],"update":{},"newImage":[]}', "'newImage' is a JSON"),
    ("oldImage a string", b'{"key":[1],"erase":{},"oldImage":"x"}', "'oldImage' is a JSON"),
    ("ts a string", b'{"key":[1],"update":{},"ts":"1.2"}', "'ts' is not a virtual timestamp"),
    ("ts of three", b'{"key":[1],"update":{},"ts":[1,2,3]}', "'ts' is not a virtual"),
    ("ts negative", b'{"key":[1],"update":{},"ts":[-1,2]}', "'ts' is not a virtual"),
    ("ts a float", b'{"key":[1],"update":{},"ts":[1.5,2]}', "'ts' is not a virtual"),
    ("ts past 64 bits", b'{"key":[1],"update":{},"ts":[1,18446744073709551616]}', "'ts'"),
    ("resolved a number", b'{"resolved":5}', "'resolved' is not a virtual timestamp"),
    ("resolved of strings", b'{"resolved":["1","2"]}', "'resolved' is not a virtual"),
    ("resolved with a key", b'{"resolved":[1,2],"key":[1]}', "barrier with the fields"),
    ("resolved with update", b'{"resolved":[1,2],"update":{}}', "barrier with the fields"),
    ("tableChanges an object", b'{"tableChanges":{}}', "'tableChanges' is not an array"),
]


@pytest.mark.parametrize(
    ("value", "reason"), [c[1:] for c in BAD_RECORDS], ids=[c[0] for c in BAD_RECORDS]
)
def test_a_bad_record_is_a_dead_letter_with_its_reason(value: bytes, reason: str) -> None:
    hydrator = ydb_hydrator()
    state = StateRecord(image={"a": 1}, updated_at_ms=1)
    record = RawRecord(TOPIC, 0, 7, None, value)
    step = engine_step(hydrator, state, record, 5)
    assert step.emitted == () and step.state is state
    (dead,) = step.dead
    assert reason in dead.reason, dead.reason
    assert dead.record is record and step.counts == {"dead_letters": 1}


def test_a_bad_record_leaves_the_next_good_one_alone() -> None:
    codec = YdbCodec()
    bad = RawRecord(TOPIC, 0, 0, None, b'{"key":[1],"update":[]}')
    assert codec.key(Read(bad)) == "[1]"
    with pytest.raises(ValueError, match="'update' is a JSON array"):
        codec.decode(Read(bad))
    good = RawRecord(TOPIC, 0, 1, None, b'{"key":[1],"update":{"a":1}}')
    assert codec.key(Read(good)) == "[1]" and codec.decode(Read(good)).after == {"a": 1}


# -- registry and detection --------------------------------------------------------------------


def test_ydb_is_a_format_of_the_command_line() -> None:
    assert "ydb" in FORMATS and isinstance(codec_for("ydb"), YdbCodec)


@pytest.mark.parametrize(
    ("document", "accepted"),
    [
        ({"key": [1], "update": {}}, True),
        ({"key": [1], "erase": {}, "ts": [1, 2]}, True),
        ({"key": [1], "reset": {}, "newImage": {}}, True),
        ({"resolved": [1, 2]}, True),
        ({"tableChanges": [], "ts": [1, 2]}, True),
        ({"resolved": "1.0"}, False),
        ({"resolved": [1, 2], "key": [1]}, False),
        ({"key": [1], "update": {}, "erase": {}}, False),
        ({"key": {"id": 1}, "update": {}}, False),
        ({"op": "c", "after": {}}, False),
        ({"schema": {}, "payload": {"op": "u"}}, False),
        ([1], False),
    ],
)
def test_accepts_what_a_ydb_changefeed_writes(document: Any, accepted: bool) -> None:
    assert YdbCodec().accepts(document) is accepted
