"""Rule 8: malformed records end as a dead letter with a clear reason; none raises."""

from __future__ import annotations

import orjson
import pytest

from hydrator.core import DeadLetter, HydrationSettings, Hydrator, RawRecord
from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE

KEY = b'{"id":1}'
GOOD_AFTER = {"id": 1, "v": "x"}


def event(**payload: object) -> bytes:
    return orjson.dumps({"before": None, "after": GOOD_AFTER, "source": {}, "op": "c", **payload})


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
    hydrator = Hydrator(HydrationSettings(max_record_bytes=1024))
    record = RawRecord("raw", 3, 42, key, value, headers)
    routed = hydrator.route(record)
    transition = hydrator.process(None, record, 0)
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


def test_there_are_at_least_fifteen_kinds() -> None:
    assert len(BAD_RECORDS) >= 15


def test_bad_record_leaves_state_untouched() -> None:
    hydrator = Hydrator()
    good = hydrator.process(None, RawRecord("raw", 0, 0, KEY, event()), 0).state
    after_bad = hydrator.process(good, RawRecord("raw", 0, 1, KEY, b"garbage"), 5)
    assert after_bad.state == good
