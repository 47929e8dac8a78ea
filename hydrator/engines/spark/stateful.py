"""The per-key step of the Spark engine: `applyInPandasWithState` around the pure core.

Rows reach a group already routed and packed (routing.py: one binary column per record) and are
sorted here by (kind, partition, offset); the function decodes the group's StateRecord, feeds
every record to the Hydrator, and returns the records to write plus its counters. No rule lives
here: this is plumbing between Spark's GroupState and `Hydrator.process / receive_handoff / tick`.

Spark's cost is per group and per column, so a group's output is packed into as few binary cells
as its size allows (usually one: every record to write and the counters); `unpack` expands them
into the Kafka sink's columns once per Arrow batch, with `mapInArrow` and no pandas.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgpack
import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from hydrator.core import Handoff, HydrationSettings, Hydrator, RawRecord, Transition
from hydrator.engines.spark.kafka_source import SOURCE_SCHEMA
from state.codec import decode_state, encode_state
from state.record import StateRecord

KIND_INPUT = 0
KIND_HANDOFF = 1
STATE_SCHEMA_VERSION = 1

# What GroupState keeps per key: the schema version, then the state codec's own versioned bytes.
STATE_SCHEMA = StructType(
    [StructField("version", IntegerType()), StructField("record", BinaryType())]
)
# Per group call, one or more cells: msgpack [records to write, counters map or None], each
# record (topic, partition, key, value, headers). A cell holds at most CHUNK_RECORDS records or
# about CHUNK_BYTES, so Spark's output Arrow batches (arrow.maxRecordsPerBatch cells) stay bounded.
PACKED_SCHEMA = StructType([StructField("packed", BinaryType())])
CHUNK_RECORDS = 256
CHUNK_BYTES = 256 * 1024
# `unpack` yields Arrow batches of at most this many records.
UNPACK_BATCH_RECORDS = 10_000
# What `unpack` expands them into: Kafka sink columns, or counters on a metrics row.
COUNTERS = (
    "events",
    "filled_columns",
    "unresolved_events",
    "stale_dropped",
    "stale_forwarded",
    "dead_letters",
    "passthrough",
    "parked",
    "parked_keys",
    "handoffs_sent",
    "handoffs_applied",
    "handoff_timeouts",
)
RECORD_FIELDS = (
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    SOURCE_SCHEMA["headers"],
)
UNPACKED_SCHEMA = StructType(
    [*RECORD_FIELDS, *(StructField(name, LongType()) for name in COUNTERS)]
)
_HEADERS_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_UNPACKED_ARROW = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", _HEADERS_ARROW),
        *((name, pa.int64()) for name in COUNTERS),
    ]
)


@dataclass(frozen=True)
class Topics:
    """Where a group's results go: per-input-topic output topics and the internal topics."""

    outputs: Mapping[str, str]
    handoff: str
    dlq: str


@lru_cache(maxsize=8)
def hydrator_for(settings: HydrationSettings, format: str) -> Hydrator:
    """One Hydrator per Python worker and configuration (workers are reused across batches)."""
    return Hydrator(settings, format)


def group_function(
    settings: HydrationSettings, format: str, topics: Topics
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    def hydrate_group(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        hydrator = hydrator_for(settings, format)
        step = _GroupStep(hydrator, topics, key[0], _load(state))
        now_ms = int(time.time() * 1000)
        if state.hasTimedOut:
            step.apply(hydrator.tick(step.state, now_ms) if step.state else Transition(None), 0)
        records: list[bytes] = []
        for frame in frames:
            if len(frame):
                records += frame["record"].tolist()
        step.feed(records, now_ms)
        _store(state, step.final_state(), hydrator, now_ms)
        packed = step.result()
        if packed:
            yield pd.DataFrame({"packed": packed})

    return hydrate_group


def unpack_record(packed: bytes) -> tuple[Any, ...]:
    """A routed record (routing.ROUTED_SCHEMA): kind, partition, offset, topic, key, value,
    headers, timestamp."""
    return msgpack.unpackb(packed, raw=False, use_list=False)


def _order(row: tuple[Any, ...]) -> tuple[int, int, int]:
    return row[0], row[1], row[2]


class _GroupStep:
    """Accumulates the outputs of one group call."""

    def __init__(
        self, hydrator: Hydrator, topics: Topics, group: str, state: StateRecord | None
    ) -> None:
        self.hydrator = hydrator
        self.topics = topics
        # keyless records, undecodable keys and ticks (routing.py) keep no state
        self.stateless = not group or group[0] in "\x01\x02\x03"
        input_topic = group.lstrip("\x01\x02").split("\x00", 1)[0]
        self.output_topic = topics.outputs.get(input_topic)
        self.state = state
        self.was_parked = state is not None and state.is_parked
        self.out: list[tuple[Any, ...]] = []
        self.counts: dict[str, int] = {}

    def feed(self, packed: list[bytes], now_ms: int) -> None:
        """The group's routed records, in (kind, partition, offset) order: inputs, then the
        handoffs for this key (a CREATE parked by an input meets its handoff in the same call)."""
        hydrator = self.hydrator
        for kind, partition, offset, topic, key, value, headers, timestamp in sorted(
            map(unpack_record, packed), key=_order
        ):
            if kind == KIND_HANDOFF:
                if key is None:
                    continue  # a tick: it only made this batch run
                handoff = Handoff.decode(value)
                self.apply(hydrator.receive_handoff(self.state, handoff, now_ms), partition)
                continue
            record = RawRecord(topic, partition, offset, key, value, headers or (), timestamp)
            # only a stateless group can hold an undecodable key; others were routed by it
            routed = hydrator.route(record) if self.stateless else None
            if routed is not None and not isinstance(routed, str):
                self.apply(Transition(None, dead=(routed,), counts={"dead_letters": 1}), partition)
                continue
            self.apply(hydrator.process(self.state, record, now_ms), partition)

    def apply(self, transition: Transition, partition: int) -> None:
        self.state = None if self.stateless else transition.state
        counts = self.counts
        for name, count in transition.counts.items():
            counts[name] = counts.get(name, 0) + count
        out = self.out
        for record in transition.emitted:
            out.append(
                (self.output_topic, record.partition, record.key, record.value, record.headers)
            )
        for dead in transition.dead:
            record = dead.to_output()
            out.append(
                (self.topics.dlq, record.partition, record.key, record.value, record.headers)
            )
        for handoff in transition.handoffs:
            key = f"{handoff.topic}\x00{handoff.new_key}".encode()
            out.append((self.topics.handoff, partition, key, handoff.encode(), ()))

    def final_state(self) -> StateRecord | None:
        return None if self.stateless else self.state

    def result(self) -> list[bytes]:
        """The group's records to write and its counters, packed into few binary cells (see
        PACKED_SCHEMA): one per group unless its output is large."""
        is_parked = self.state is not None and self.state.is_parked
        parked_keys = int(is_parked) - int(self.was_parked)
        if parked_keys:
            self.counts["parked_keys"] = self.counts.get("parked_keys", 0) + parked_keys
        metrics = {name: count for name, count in self.counts.items() if count} or None
        if not self.out and metrics is None:
            return []
        chunks: list[bytes] = []
        start = size = 0
        for index, (_, _, key, value, _) in enumerate(self.out):
            size += len(value or b"") + len(key or b"") + 64
            if size >= CHUNK_BYTES or index - start + 1 >= CHUNK_RECORDS:
                chunks.append(_pack((self.out[start : index + 1], None)))
                start, size = index + 1, 0
        if start < len(self.out) or metrics is not None or not chunks:
            chunks.append(_pack((self.out[start:], metrics)))
        return chunks


_pack = msgpack.Packer(use_bin_type=True).pack


def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` over the group outputs: records to sink columns (Arrow arrays built from plain
    lists, no pandas), the counters summed into one metrics row per input batch."""
    for batch in batches:
        topics: list[str] = []
        partitions: list[int] = []
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        headers: list[Any] = []
        metrics: Counter[str] = Counter()
        for packed in batch.column(0).to_pylist():
            records, counts = msgpack.unpackb(packed, raw=False, use_list=False)
            for topic, partition, key, value, cells in records:
                topics.append(topic)
                partitions.append(partition)
                keys.append(key)
                values.append(value)
                headers.append(cells)
            if counts:
                metrics.update(counts)
            if len(topics) >= UNPACK_BATCH_RECORDS:
                yield _records_batch(topics, partitions, keys, values, headers)
                topics, partitions, keys, values, headers = [], [], [], [], []
        if topics:
            yield _records_batch(topics, partitions, keys, values, headers)
        if metrics:
            yield _metrics_batch(metrics)


def _records_batch(
    topics: list[str],
    partitions: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[Any],
) -> pa.RecordBatch:
    n = len(topics)
    columns = [
        pa.array(topics, pa.string()),
        pa.array(partitions, pa.int32()),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(headers, _HEADERS_ARROW),
    ]
    columns += [pa.nulls(n, pa.int64())] * len(COUNTERS)
    return pa.RecordBatch.from_arrays(columns, schema=_UNPACKED_ARROW)


def _metrics_batch(metrics: Mapping[str, int]) -> pa.RecordBatch:
    columns = [pa.nulls(1, field.type) for field in _UNPACKED_ARROW][: len(RECORD_FIELDS)]
    columns += [pa.array([metrics.get(name, 0)], pa.int64()) for name in COUNTERS]
    return pa.RecordBatch.from_arrays(columns, schema=_UNPACKED_ARROW)


def _load(state: GroupState) -> StateRecord | None:
    if not state.exists:
        return None
    version, record = state.get
    if version != STATE_SCHEMA_VERSION:
        raise ValueError(f"Spark state schema version {version} is newer than this release")
    return decode_state(record)


def _store(state: GroupState, record: StateRecord | None, hydrator: Hydrator, now_ms: int) -> None:
    if record is None:
        if state.exists:
            state.remove()
        return
    state.update((STATE_SCHEMA_VERSION, encode_state(record)))
    deadline = hydrator.next_deadline_ms(record)
    if deadline is not None:
        state.setTimeoutDuration(max(deadline - now_ms, 1))
