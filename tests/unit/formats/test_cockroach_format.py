"""`--format cockroachdb` (alias `cockroach`): CockroachDB changefeed messages in the shapes
CockroachDB's documentation and encoder give them, hydrated with `before`; bad ones are dead
letters with a reason."""

from __future__ import annotations

import orjson
import pytest

from hydrator.core import HydrationSettings, Hydrator, RawRecord, Read, Transition
from hydrator.core.hydrator import HEADER_STALE
from hydrator.core.records import HEADER_ERROR
from hydrator.core.settings import OnStale
from hydrator.formats import FORMAT_NAMES, codec_for
from hydrator.formats.cockroachdb import CockroachCodec
from hydrator.kafka.partitioner import changefeed_partition
from state.record import StateRecord
from tests.support.core import engine_step

TOPIC = "office_dogs"
T1 = "1532377312562986715.0000000000"
T2 = "1532377312562986716.0000000000"  # 1 ns later: the same double as T1
T3 = "1532377312562986716.0000000001"  # the same wall time, the next logical tick


class Feed:
    """One partition of a changefeed topic through the core, as an engine drives it."""

    def __init__(self, **settings: object) -> None:
        self.hydrator = Hydrator(codec_for("cockroachdb"), HydrationSettings(**settings))
        self.states: dict[str | None, StateRecord | None] = {}
        self.offset = 0

    def send(self, key: bytes | None, value: bytes | None) -> Transition:
        record = RawRecord(TOPIC, 0, self.offset, key, value)
        self.offset += 1
        routed = self.hydrator.route(record)
        state = self.states.get(routed) if isinstance(routed, str) else None
        step = engine_step(self.hydrator, state, record, 0)
        if isinstance(routed, str):
            self.states[routed] = step.state
        return step

    def value(self, key: bytes | None, value: bytes) -> bytes | None:
        (output,) = self.send(key, value).emitted
        return output.value


def test_both_names_select_the_codec() -> None:
    assert {"cockroachdb", "cockroach"} <= set(FORMAT_NAMES)
    assert isinstance(codec_for("cockroach"), CockroachCodec)
    assert isinstance(codec_for("cockroachdb"), CockroachCodec)


def test_insert_update_delete_get_the_previous_row() -> None:
    feed = Feed()
    # CockroachDB's spacing; `before` is written into the input's own text
    insert = b'{"after": {"id": 1, "name": "Petee"}, "updated": "%s"}' % T1.encode()
    assert feed.value(b"[1]", insert) == insert[:-1] + b', "before": null}'
    update = b'{"after": {"id": 1, "name": "Petee H"}, "updated": "%s"}' % T2.encode()
    assert orjson.loads(feed.value(b"[1]", update) or b"")["before"] == {"id": 1, "name": "Petee"}
    delete = b'{"after": null, "updated": "%s"}' % T3.encode()
    hydrated = orjson.loads(feed.value(b"[1]", delete) or b"")
    assert hydrated == {"after": None, "updated": T3, "before": {"id": 1, "name": "Petee H"}}
    reinsert = b'{"after": {"id": 1, "name": "Lucky"}, "updated": "1532377312562986717.0000000000"}'
    assert orjson.loads(feed.value(b"[1]", reinsert) or b"")["before"] is None


def test_delete_of_a_row_never_seen_has_a_null_before() -> None:
    """The documentation: a delete can come for a row whose insert never did."""
    feed = Feed()
    hydrated = feed.value(b"[5]", b'{"after": null, "updated": "%s"}' % T1.encode())
    assert orjson.loads(hydrated or b"") == {"after": None, "updated": T1, "before": None}


def test_out_of_order_duplicate_of_an_emitted_version_is_dropped() -> None:
    """The documentation's example: Carl at t1, Petee at t2, then Carl at t1 again."""
    feed = Feed()
    carl = b'{"after": {"id": 1, "name": "Carl"}, "updated": "%s"}' % T1.encode()
    petee = b'{"after": {"id": 1, "name": "Petee"}, "updated": "%s"}' % T2.encode()
    feed.send(b"[1]", carl)
    feed.send(b"[1]", petee)
    again = feed.send(b"[1]", carl)
    assert again.emitted == () and again.counts == {"stale_dropped": 1}
    exact_duplicate = feed.send(b"[1]", petee)
    assert exact_duplicate.counts == {"stale_dropped": 1}
    later = b'{"after": {"id": 1, "name": "Ernie"}, "updated": "%s"}' % T3.encode()
    assert orjson.loads(feed.value(b"[1]", later) or b"")["before"]["name"] == "Petee"


def test_stale_messages_can_be_forwarded_marked() -> None:
    feed = Feed(on_stale=OnStale.FORWARD)
    carl = b'{"after": {"id": 1, "name": "Carl"}, "updated": "%s"}' % T2.encode()
    feed.send(b"[1]", carl)
    (output,) = feed.send(b"[1]", carl).emitted
    assert output.value == carl and (HEADER_STALE, b"true") in output.headers


def test_updated_is_an_integer_pair_not_a_float() -> None:
    """T1 and T2 differ by one nanosecond, the same double; a logical tick orders too."""
    codec = CockroachCodec()
    assert float(T1) == float(T2)
    positions = [
        codec.decode(
            Read(RawRecord(TOPIC, 0, 0, b"[1]", b'{"after":null,"updated":"%s"}' % t.encode()))
        )
        for t in (T1, T2, T3, "9.0000000000", "10.0000000000")
    ]
    assert [p.position for p in positions] == [  # type: ignore[union-attr]
        (1532377312562986715, 0),
        (1532377312562986716, 0),
        (1532377312562986716, 1),
        (9, 0),
        (10, 0),
    ]


def test_a_synthetic_timestamp_mark_is_read() -> None:
    """Some releases end a synthetic HLC timestamp with `?`."""
    codec = CockroachCodec()
    record = RawRecord(TOPIC, 0, 0, b"[1]", b'{"after":null,"updated":"%s?"}' % T1.encode())
    assert codec.decode(Read(record)).position == (1532377312562986715, 0)  # type: ignore[union-attr]


def test_resolved_messages_pass_through_unchanged() -> None:
    feed = Feed()
    resolved = b'{"resolved":"1532379887442299001.0000000000"}'
    step = feed.send(None, resolved)
    assert [(o.key, o.value) for o in step.emitted] == [(None, resolved)]
    assert step.counts == {"passthrough": 1}


def test_kafka_tombstones_pass_through() -> None:
    step = Feed().send(b"[1]", None)
    assert [o.value for o in step.emitted] == [None]


def test_diff_before_is_kept_and_optional_fields_round_trip() -> None:
    """WITH diff, mvcc_timestamp, key_in_value, topic_in_value: the input is kept byte for
    byte; without diff only `before` is added."""
    feed = Feed()
    first = (
        b'{"after": {"id": 1, "name": "Carl"}, "key": [1], "mvcc_timestamp": "%s", '
        b'"topic": "office_dogs", "updated": "%s"}' % (T1.encode(), T1.encode())
    )
    assert feed.value(b"[1]", first) == first[:-1] + b', "before": null}'
    with_diff = (
        b'{"after": {"id": 1, "name": "Petee"}, "before": {"id": 1, "name": "Carl"}, '
        b'"updated": "%s", "mvcc_timestamp": "%s"}' % (T2.encode(), T2.encode())
    )
    assert feed.value(b"[1]", with_diff) == with_diff
    diff_delete = b'{"after": null, "before": {"id": 1, "name": "Petee"}, "updated": "%s"}' % (
        T3.encode()
    )
    assert feed.value(b"[1]", diff_delete) == diff_delete


def test_numbers_keep_their_digits_in_before() -> None:
    """DECIMAL digits, INT8 extremes and JSONB numbers wider than 64 bits, as written."""
    feed = Feed()
    row = (
        b'{"id": 1, "price": 1.10, "tiny": 1E-7, "huge": 1.23456789012345678901234567890E+40, '
        b'"qty": -9223372036854775808, "doc": {"n": 123456789012345678901234567890, "d": 0.10}}'
    )
    feed.send(b"[1]", b'{"after": %s, "updated": "%s"}' % (row, T1.encode()))
    update = b'{"after": {"id": 1, "price": 2}, "updated": "%s"}' % T2.encode()
    hydrated = feed.value(b"[1]", update) or b""
    assert hydrated.endswith(b', "before": %s}' % row.replace(b": ", b":").replace(b", ", b","))


def test_composite_and_decimal_primary_keys_name_one_row_however_spaced() -> None:
    codec = CockroachCodec()
    assert codec.key(Read(RawRecord(TOPIC, 0, 0, b'[1, "eu"]', None))) == '[1,"eu"]'
    assert codec.key(Read(RawRecord(TOPIC, 0, 0, b'[1,"eu"]', None))) == '[1,"eu"]'
    # DECIMAL keys that one double would merge stay two rows
    assert codec.key(Read(RawRecord(TOPIC, 0, 0, b"[1.00000000000000000001]", None))) != codec.key(
        Read(RawRecord(TOPIC, 0, 0, b"[1.00000000000000000002]", None))
    )
    assert codec.key(Read(RawRecord(TOPIC, 0, 0, None, b'{"resolved":"1.0"}'))) is None


def test_a_backfill_re_emission_gets_the_row_before_the_new_column() -> None:
    """ADD COLUMN with a default: duplicates first (stale), then each row with the column."""
    feed = Feed()
    old = b'{"after": {"id": 1, "name": "Petee H"}, "updated": "%s"}' % T1.encode()
    feed.send(b"[1]", old)
    assert feed.send(b"[1]", old).counts == {"stale_dropped": 1}
    new = b'{"after": {"id": 1, "likes_treats": true, "name": "Petee H"}, "updated": "%s"}' % (
        T2.encode()
    )
    assert orjson.loads(feed.value(b"[1]", new) or b"")["before"] == {"id": 1, "name": "Petee H"}


def test_without_fill_before_a_known_row_is_not_added() -> None:
    feed = Feed(fill_before=False)
    first = b'{"after": {"id": 1}, "updated": "%s"}' % T1.encode()
    assert feed.value(b"[1]", first) == first[:-1] + b', "before": null}'
    second = b'{"after": {"id": 1, "x": 2}, "updated": "%s"}' % T2.encode()
    assert feed.value(b"[1]", second) == second


def test_auto_detection_shapes() -> None:
    codec = CockroachCodec()
    assert codec.accepts({"after": {"id": 1}, "updated": T1})
    assert codec.accepts({"after": None, "updated": T1})
    assert codec.accepts({"resolved": T1})
    assert not codec.accepts({"resolved": [1, 2]})  # YDB's barrier
    assert not codec.accepts({"before": None, "after": {"id": 1}, "op": "c"})  # Debezium
    assert not codec.accepts({"schema": {}, "payload": {"after": {}}})
    assert not codec.accepts({"key": [1], "update": {}})  # YDB
    assert not codec.accepts([1])


def test_the_end_to_end_partitioner_places_keys_as_cockroachdb_does() -> None:
    """CockroachDB's own reference placements (TestChangefeedConsistentPartitioning: keys over
    1031 partitions, which it keeps across upgrades)."""
    reference = {
        b"0": 1003,
        b"01": 351,
        b"10": 940,
        b"a": 292,
        b"\x00": 732,
        b"\xff \xff": 164,
        b"a" * 2048: 755,
        b"a" * 2047 + b"A": 592,
    }
    assert {key: changefeed_partition(key, 1031) for key in reference} == reference


# -- bad input ------------------------------------------------------------------------------------

ROW = b'{"after": {"id": 1}, "updated": "%s"}' % T1.encode()
BAD: list[tuple[str, bytes | None, bytes | None, str]] = [
    # (case, key, value, expected reason fragment)
    ("value not JSON", b"[1]", b"{not json", "BadInput: value is not JSON"),
    ("value NaN", b"[1]", b'{"after": {"x": NaN}, "updated": "1.0"}', "value is not JSON"),
    ("value an array", b"[1]", b"[1]", "value is a JSON array, not an object"),
    ("value a string", b"[1]", b'"x"', "value is a JSON string, not an object"),
    (
        "bare envelope",
        b"[1]",
        b'{"__crdb__": {"updated": "%s"}, "id": 1}' % T1.encode(),
        "no 'after' (envelope=wrapped) and no 'resolved'",
    ),
    ("no updated (docs default)", b"[1]", b'{"after": {"id": 1}}', "WITH updated"),
    ("after a string", b"[1]", b'{"after": "x", "updated": "1.0"}', "'after' is a JSON string"),
    ("after an array", b"[1]", b'{"after": [1], "updated": "1.0"}', "'after' is a JSON array"),
    ("before a number", b"[1]", b'{"after": null, "before": 3, "updated": "1.0"}', "'before'"),
    ("updated a float", b"[1]", b'{"after": null, "updated": 1.5}', "'updated' is a JSON number"),
    ("updated null", b"[1]", b'{"after": null, "updated": null}', "'updated' is a JSON null"),
    ("updated no dot", b"[1]", b'{"after": null, "updated": "15"}', 'not "<wall>.<logical>"'),
    ("updated 3 parts", b"[1]", b'{"after": null, "updated": "1.2.3"}', "not"),
    ("updated negative", b"[1]", b'{"after": null, "updated": "-1.0"}', "not"),
    ("updated exponent", b"[1]", b'{"after": null, "updated": "1e9.0"}', "not"),
    ("updated arabic digits", b"[1]", '{"after":null,"updated":"\u0661.0"}'.encode(), "not"),
    (
        "updated beyond 64 bits",
        b"[1]",
        b'{"after": null, "updated": "99999999999999999999.0"}',
        "out of range (64 bits)",
    ),
    ("updated 25 digits", b"[1]", b'{"after": null, "updated": "%s.0"}' % b"9" * 25, "not"),
    ("resolved malformed", None, b'{"resolved": "soon"}', "'resolved' is 'soon'"),
    ("row without a key", None, ROW, "a row message without a Kafka key"),
    ("key not JSON", b"[1", ROW, "InvalidKey: key is not JSON"),
    ("key an object", b'{"id": 1}', ROW, "key is a JSON object, not the array"),
    ("key a number", b"1", ROW, "key is a JSON number"),
    ("key an empty array", b"[]", ROW, "key is an empty array"),
    ("key JSON null", b"null", ROW, "key is a JSON null"),
]


@pytest.mark.parametrize(("case", "key", "value", "reason"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_dead_letter_with_a_reason(
    case: str, key: bytes | None, value: bytes | None, reason: str
) -> None:
    feed = Feed()
    feed.send(b"[1]", ROW)
    before = dict(feed.states)
    step = feed.send(key, value)
    assert step.emitted == () and step.counts == {"dead_letters": 1}, case
    (dead,) = step.dead
    assert reason in dead.reason, dead.reason
    header = dict(dead.to_output().headers)[HEADER_ERROR]
    assert header is not None and reason.encode() in header
    assert feed.states == before  # nothing learnt from a bad record
