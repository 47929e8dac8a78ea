"""The Spark engine's Python steps without Spark: routing (mapInArrow), the group function
(applyInPandasWithState, with a stand-in GroupState) and its packed output as the Kafka sink
reads it."""

from __future__ import annotations

import base64
import time
from collections import defaultdict
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import BinaryType, StructField, StructType

from hydrator.core import HydrationSettings, RawRecord
from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE
from hydrator.engines.spark import stateful
from hydrator.engines.spark.kafka_options import KafkaOptionError
from hydrator.engines.spark.kafka_sink import KafkaStreamWriter, pack_records, unpack_records
from hydrator.engines.spark.routing import KEYLESS, TICK, UNDECODABLE, route
from hydrator.engines.spark.stateful import (
    COUNTERS,
    NEXT_TIMEOUT,
    OUTPUT_SCHEMA,
    HydratorSpec,
    group_function,
)
from hydrator.topology.layout import Topology
from tests.support.hostile_events import FUZZ, good_record, hostile_records

TOPIC = "db.public.items"
TOPOLOGY = Topology("app", {TOPIC: "out"}, 4)
PLACEHOLDER = "__debezium_unavailable_value"


class FakeState:
    """The part of pyspark's GroupState the group function uses."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None
        self.hasTimedOut = False
        self.timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def setTimeoutDuration(self, ms: int) -> None:
        self.timeout_ms = ms


def event(key: int, lsn: int, doc: str) -> bytes:
    after = {"id": key, "n": lsn, "doc": doc}
    source = {"connector": "postgresql", "lsn": lsn, "sequence": f'["{lsn - 1}","{lsn}"]'}
    op = "u" if doc == PLACEHOLDER else "c"
    return orjson.dumps({"before": None, "after": after, "source": source, "op": op, "ts_ms": 0})


def headers_json(headers: list[tuple[str, bytes | None]] | None) -> str | None:
    """What Spark's `to_json(headers)` gives: base64 values, a null value left out."""
    if headers is None:
        return None
    cells = []
    for name, value in headers:
        cell: dict[str, str] = {"key": name}
        if value is not None:
            cell["value"] = base64.b64encode(value).decode()
        cells.append(cell)
    return orjson.dumps(cells).decode()


def source_batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    names = ["topic", "partition", "offset", "key", "value", "headers", "timestamp"]
    columns = list(zip(*rows, strict=True))
    types = [pa.string(), pa.int32(), pa.int64(), pa.binary(), pa.binary(), pa.string()]
    arrays = [pa.array([*c], t) for c, t in zip(columns, types, strict=False)]
    arrays.append(pa.array([*columns[6]], pa.int64()))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def output_rows(frames: list[pd.DataFrame]) -> list[dict[str, Any]]:
    """The group function's output rows, records as the Kafka sink produces them (its own
    reader) and counters by name: {"topic", "partition", "key", "value", "headers"} or
    {"counts": {...}}."""
    rows: list[dict[str, Any]] = []
    for frame in frames:
        assert list(frame.columns) == OUTPUT_SCHEMA.names
        batch = pa.RecordBatch.from_pandas(frame[["records"]], preserve_index=False)
        for topic, value, key, partition, headers, _ in KafkaStreamWriter._packed_rows(batch):
            rows.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "key": key,
                    "value": value,
                    "headers": headers or [],
                }
            )
        for counts in frame["counts"]:
            if counts is not None:
                *summed, next_timeout = counts
                rows.append(
                    {
                        "counts": dict(zip(COUNTERS, summed, strict=True)),
                        NEXT_TIMEOUT: next_timeout,
                    }
                )
    return rows


def run(rows: list[tuple[Any, ...]], states: dict[str, FakeState]) -> list[dict[str, Any]]:
    """Route and group (in one call per group, as Spark would) one micro-batch."""
    settings = HydrationSettings()
    (routed,) = route(HydratorSpec(settings), TOPOLOGY.handoff_topic)(iter([source_batch(rows)]))
    groups: dict[str, list[bytes]] = defaultdict(list)
    for group, record in zip(*(c.to_pylist() for c in routed.columns), strict=True):
        groups[group].append(record)
    hydrate = group_function(HydratorSpec(settings), TOPOLOGY)
    frames: list[pd.DataFrame] = []
    for group, records in groups.items():
        frame = pd.DataFrame({"group": [group] * len(records), "record": records})
        state = states.setdefault(group, FakeState())
        frames += hydrate((group,), iter([frame]), state)
    return output_rows(frames)


def records_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if "counts" not in row]


def counts_of(rows: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for row in rows:
        for name, count in row.get("counts", {}).items():
            total[name] += count
    return total


def test_records_are_hydrated_with_their_headers_and_counted() -> None:
    states: dict[str, FakeState] = {}
    doc = "d" * 3000
    first = [(TOPIC, 1, 10, b'{"id": 7}', event(7, 100, doc), None, 5)]
    run(first, states)
    (group,) = states
    assert group == f'{TOPIC}\x00{{"id":7}}' and states[group].exists

    headers = [("trace", b"\x00\xff"), ("empty", None)]
    update = (TOPIC, 1, 11, b'{"id":7}', event(7, 101, PLACEHOLDER), headers_json(headers), 6)
    rows = run([update], states)
    (record,) = records_of(rows)
    assert record["topic"] == "out" and record["partition"] == 1
    assert record["key"] == b'{"id":7}'
    assert orjson.loads(record["value"])["after"]["doc"] == doc
    cells = record["headers"]
    assert cells[:2] == headers
    metrics = counts_of(rows)
    assert (HEADER_FILLED, b"doc") in cells and (HEADER_SOURCE, f"{TOPIC}:1:11".encode()) in cells
    assert metrics["events"] == 1 and metrics["filled_columns"] == 1


def test_keyless_undecodable_and_tick_records_keep_no_state() -> None:
    states: dict[str, FakeState] = {}
    rows = [
        (TOPIC, 2, 1, None, event(1, 10, "x"), None, 0),
        (TOPIC, 2, 2, b"\xff{", event(2, 11, "y"), None, 0),
        (TOPOLOGY.handoff_topic, 0, 5, None, None, None, 0),
    ]
    out = run(rows, states)
    assert set(states) == {f"{KEYLESS}{TOPIC}\x002", f"{UNDECODABLE}{TOPIC}\x002", TICK}
    assert not any(state.exists for state in states.values())
    by_topic = {r["topic"]: r for r in records_of(out)}
    assert set(by_topic) == {"out", "app-dlq"}
    assert by_topic["app-dlq"]["value"] == event(2, 11, "y")
    assert counts_of(out)["dead_letters"] == 1


def test_a_group_reports_the_timeout_it_arms_on_the_wall_clock() -> None:
    """NEXT_TIMEOUT: the moment the driver must make a batch run (timeouts.py); the processing
    deadline plus the clock offset, which is what Spark arms (wall clock)."""
    settings = HydrationSettings(tombstone_retention_ms=60_000)
    offset_ms = 5_000
    hydrate = group_function(HydratorSpec(settings), TOPOLOGY, clock_offset_ms=offset_ms)
    group = f'{TOPIC}\x00{{"id":7}}'

    def call(value: bytes | None, offset: int, state: FakeState) -> list[dict[str, Any]]:
        cell = stateful.msgpack.packb(
            (stateful.KIND_INPUT, 1, offset, TOPIC, b'{"id":7}', value, None, 0), use_bin_type=True
        )
        frame = pd.DataFrame({"group": [group], "record": [cell]})
        return output_rows(list(hydrate((group,), iter([frame]), state)))

    state = FakeState()
    live = call(event(7, 100, "d"), 0, state)
    assert [row[NEXT_TIMEOUT] for row in live if "counts" in row] == [None]
    assert state.timeout_ms is None

    delete = orjson.dumps(
        {"before": {"id": 7}, "after": None, "source": {"lsn": 101}, "op": "d", "ts_ms": 0}
    )
    before_ms = int(time.time() * 1000)
    rows = call(delete, 1, state)
    after_ms = int(time.time() * 1000)
    (reported,) = [row[NEXT_TIMEOUT] for row in rows if "counts" in row]
    assert before_ms + 60_000 <= reported <= after_ms + 60_000  # offset taken off, put back
    assert state.timeout_ms is not None and 59_000 <= state.timeout_ms <= 60_000


def _pyspark_frames(chunks: list[list[pd.Series]]) -> Any:
    """A group's frames as PySpark 4's worker hands them over: a lazy generator, compiled in a
    file of that name, concatenating each chunk's column Series."""
    code = compile("(pd.concat(x, axis=1) for x in chunks)", "/x/pyspark/worker.py", "eval")
    return eval(code, {"pd": pd, "chunks": iter(chunks)})


def test_the_group_records_are_the_same_read_from_pyspark_chunks_or_from_frames() -> None:
    def chunk(cells: list[bytes]) -> list[pd.Series]:
        return [pd.Series(["g"] * len(cells), name="group"), pd.Series(cells, name="record")]

    chunks = [chunk([b"a", b"b"]), chunk([b"c"])]
    assert stateful._series_chunks(_pyspark_frames(chunks)) is not None
    assert stateful.packed_records(_pyspark_frames(chunks)) == [b"a", b"b", b"c"]
    frames = [pd.concat(c, axis=1) for c in chunks]
    assert stateful.packed_records(iter(frames)) == [b"a", b"b", b"c"]
    # a generator of another file, or one already started, is read as frames
    other = (f for f in frames)
    assert stateful._series_chunks(other) is None
    assert stateful.packed_records(other) == [b"a", b"b", b"c"]
    started = _pyspark_frames(chunks)
    first = next(started)
    assert stateful._series_chunks(started) is None
    assert first["record"].tolist() + stateful.packed_records(started) == [b"a", b"b", b"c"]
    # a chunk without a Series named `record`: the frame PySpark would make is read
    odd = [[pd.DataFrame({"group": ["g"], "record": [b"z"]})]]
    assert stateful.packed_records(_pyspark_frames(odd)) == [b"z"]


def test_a_large_group_output_is_split_into_several_cells_in_offset_order() -> None:
    n = stateful.CHUNK_RECORDS * 2 + 3
    rows = [(TOPIC, 0, i, b'{"id":1}', event(1, 100 + i, "v"), None, 0) for i in range(n)]
    settings = HydrationSettings()
    (routed,) = route(HydratorSpec(settings), TOPOLOGY.handoff_topic)(iter([source_batch(rows)]))
    frame = routed.to_pandas().sample(frac=1, random_state=1)  # any order
    group = frame["group"].iloc[0]
    (out,) = group_function(HydratorSpec(settings), TOPOLOGY)((group,), iter([frame]), FakeState())
    assert len(out) == 3
    assert [c is not None for c in out["counts"]] == [False, False, True]  # on the last row
    rows = output_rows([out])
    records = records_of(rows)
    assert [orjson.loads(r["value"])["after"]["n"] for r in records] == list(range(100, 100 + n))
    assert counts_of(rows)["events"] == n


def test_packed_records_round_trip_through_the_sink_reader() -> None:
    records = [
        ("out", 3, b"k", b"v", (("h", b"1"), ("empty", None))),
        (None, None, None, None, None),
    ]
    cell = pack_records(records)
    assert list(unpack_records(cell)) == records
    batch = pa.RecordBatch.from_arrays([pa.array([cell, None], pa.binary())], names=["records"])
    produced = list(KafkaStreamWriter._packed_rows(batch))
    assert produced == [
        ("out", b"v", b"k", 3, [("h", b"1"), ("empty", None)], None),
        (None, None, None, None, None, None),
    ]


def test_a_records_cell_of_other_bytes_is_a_clear_error() -> None:
    for cell in (b"\xc1", pack_records([]) + b"x", b"\x93\x01\x02\x03"):
        with pytest.raises(ValueError, match="not packed by pack_records"):
            unpack_records(cell)


def test_the_sink_needs_no_other_column_beside_packed_records() -> None:
    KafkaStreamWriter(
        {"kafka.bootstrap.servers": "b:9092"},
        StructType([StructField("records", BinaryType())]),
    )
    with pytest.raises(KafkaOptionError, match="'value' column"):
        KafkaStreamWriter(
            {"kafka.bootstrap.servers": "b:9092"},
            StructType([StructField("packed", BinaryType())]),
        )


WIDE = 123456789012345678901234567890  # wider than 64 bits
POISON = [
    (b"[" * 1000, event(1, 10, "x"), None),
    (b'{"id":1}', event(1, 11, "x"), [("__debezium.oldkey", b"[" * 1000)]),
    (b'{"id":"\\ud800"}', event(1, 12, "x"), None),
    (b'{"id":1}', event(1, 13, "x").replace(b'\\"13\\"', b'\\"' + b"9" * 30 + b'\\"'), None),
    (
        b'{"id":1}',
        orjson.dumps({"schema": {"fields": 5}, "payload": {"op": "c", "after": {"id": 1}}}),
        None,
    ),
]


def test_poison_records_are_dead_letters_and_wide_integers_stay_exact() -> None:
    states: dict[str, FakeState] = {}
    wide_key = b'{"id":%d}' % WIDE
    wide_event = event(2, 20, "d").replace(b'"n":20', b'"n":%d' % WIDE)
    rows = [(TOPIC, 0, i, k, v, headers_json(h), 0) for i, (k, v, h) in enumerate(POISON)]
    rows.append((TOPIC, 0, 10, wide_key, wide_event, None, 0))
    out = run(rows, states)
    dead = [r for r in records_of(out) if r["topic"] == "app-dlq"]
    assert sorted(r["value"] for r in dead) == sorted(v for _, v, _ in POISON)
    assert all(dict(r["headers"])["hydrator.error"] for r in dead)
    (good,) = [r for r in records_of(out) if r["topic"] == "out"]
    assert good["value"] == wide_event
    # the wide integer is in the key's state, exactly, and fills the next event
    update = event(2, 21, PLACEHOLDER).replace(b'"n":21', b'"n":%d' % (WIDE + 1))
    (filled,) = records_of(run([(TOPIC, 0, 11, wide_key, update, None, 0)], states))
    document = orjson.loads(filled["value"].replace(b"%d" % (WIDE + 1), b"0"))
    assert document["after"]["doc"] == "d" and b"%d" % (WIDE + 1) in filled["value"]


def test_an_unreadable_handoff_is_a_dead_letter_and_the_key_goes_on() -> None:
    states: dict[str, FakeState] = {}
    run([(TOPIC, 1, 0, b'{"id":7}', event(7, 100, "d"), None, 0)], states)
    group = f'{TOPIC}\x00{{"id":7}}'
    rows = [(TOPOLOGY.handoff_topic, 1, 3, group.encode(), b"\x93not a handoff", None, 0)]
    out = run(rows, states)
    (dead,) = records_of(out)
    assert dead["topic"] == "app-dlq" and dead["value"] == b"\x93not a handoff"
    assert dict(dead["headers"])["hydrator.error"].startswith(b"unreadable handoff: ")
    update = (TOPIC, 1, 1, b'{"id":7}', event(7, 101, PLACEHOLDER), None, 0)
    (filled,) = records_of(run([update], states))
    assert orjson.loads(filled["value"])["after"]["doc"] == "d"


def test_an_unreadable_state_is_counted_and_the_key_starts_afresh() -> None:
    states: dict[str, FakeState] = {}
    run([(TOPIC, 1, 0, b'{"id":7}', event(7, 100, "d"), None, 0)], states)
    (state,) = states.values()
    state.value = (stateful.STATE_SCHEMA_VERSION, b"\x01\xc1garbage")
    out = run([(TOPIC, 1, 1, b'{"id":7}', event(7, 101, PLACEHOLDER), None, 0)], states)
    (emitted,) = records_of(out)
    assert dict(emitted["headers"])["hydrator.unresolved"] == b"doc"
    assert counts_of(out)["state_unreadable"] == 1
    assert state.value[1][0] == 1  # written again, readable


@FUZZ
@given(st.lists(hostile_records(), min_size=1, max_size=6), st.binary(max_size=30))
def test_no_hostile_record_escapes_routing_or_the_group_function(
    cases: list[tuple[RawRecord, int]], handoff_bytes: bytes
) -> None:
    """Hostile input records and handoff-topic bytes, meeting keys with state (a known row, a
    parked key change): every input record ends as an output, a dead letter or a counted
    park or drop, and nothing raises."""
    states: dict[str, FakeState] = {}
    for key in {key for _, key in cases}:
        oldkey = [("__debezium.oldkey", b'{"id":%d}' % (key + 100))]
        known = good_record(key, "c", 500)
        parked = good_record(key, "u", 501, tuple(oldkey))
        run([(TOPIC, 0, 500, known.key, known.value, None, 0)], states)
        run([(TOPIC, 0, 501, parked.key, parked.value, headers_json(oldkey), 0)], states)
    rows = [
        (TOPIC, 0, 600 + i, r.key, r.value, headers_json(list(r.headers)), 0)
        for i, (r, _) in enumerate(cases)
    ]
    rows.append((TOPOLOGY.handoff_topic, 0, 9, handoff_bytes or None, handoff_bytes, None, 0))
    out = run(rows, states)
    counts = counts_of(out)
    ends = sum(counts[name] for name in ("events", "dead_letters", "passthrough", "parked"))
    ends += counts["stale_dropped"] + counts["redelivered_parked"]
    assert ends >= len(cases), (counts, rows)
