"""The per-key step of the Spark engine: `applyInPandasWithState` around the pure core.

Rows reach a group already routed (see routing.py) and sorted out here by (kind, partition,
offset); the function decodes the group's StateRecord, feeds every row to the Hydrator, and
returns the records to write plus one metrics row. No rule lives here: this is plumbing between
Spark's GroupState and `Hydrator.process / receive_handoff / tick`.

Spark's cost is per group, so the group's output is one packed binary column (building a
many-column pandas frame per group cost more than hydrating); `unpack` expands it once per
batch partition. Input columns become plain lists once and the loop is plain Python.
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
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from hydrator.core import Handoff, HydrationSettings, Hydrator, OutputRecord, RawRecord, Transition
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
# Per group call: packed records to write, then at most one packed metrics map.
PACKED_SCHEMA = StructType([StructField("packed", BinaryType())])
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
        for frame in frames:
            step.feed(frame, now_ms)
        _store(state, step.final_state(), hydrator, now_ms)
        yield step.result()

    return hydrate_group


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
        self.packed: list[bytes] = []
        self.counts: Counter[str] = Counter()

    def feed(self, frame: pd.DataFrame, now_ms: int) -> None:
        rows = sorted(
            zip(
                frame["kind"].tolist(),
                frame["partition"].tolist(),
                frame["offset"].tolist(),
                frame["topic"].tolist(),
                frame["key"].tolist(),
                frame["value"].tolist(),
                frame["headers"].tolist(),
                frame["timestamp"].tolist(),
                strict=True,
            ),
            key=lambda row: (row[0], row[1], row[2]),
        )
        for kind, partition, offset, topic, key, value, headers, timestamp in rows:
            if kind == KIND_HANDOFF:
                if key is None:
                    continue  # a tick: it only made this batch run
                handoff = Handoff.decode(value)
                self.apply(self.hydrator.receive_handoff(self.state, handoff, now_ms), partition)
                continue
            record = RawRecord(topic, partition, offset, key, value, _headers(headers), timestamp)
            # only a stateless group can hold an undecodable key; others were routed by it
            routed = self.hydrator.route(record) if self.stateless else None
            if routed is not None and not isinstance(routed, str):
                self.apply(Transition(None, dead=(routed,), counts={"dead_letters": 1}), partition)
                continue
            self.apply(self.hydrator.process(self.state, record, now_ms), partition)

    def apply(self, transition: Transition, partition: int) -> None:
        self.state = None if self.stateless else transition.state
        self.counts.update(transition.counts)
        for out in transition.emitted:
            self._append(self.output_topic, out)
        for dead in transition.dead:
            self._append(self.topics.dlq, dead.to_output())
        for handoff in transition.handoffs:
            self._append(
                self.topics.handoff,
                OutputRecord(
                    partition,
                    f"{handoff.topic}\x00{handoff.new_key}".encode(),
                    handoff.encode(),
                    (),
                ),
            )

    def _append(self, topic: str | None, out: OutputRecord) -> None:
        self.packed.append(_pack([topic, out.partition, out.key, out.value, out.headers]))

    def final_state(self) -> StateRecord | None:
        return None if self.stateless else self.state

    def result(self) -> pd.DataFrame:
        is_parked = self.state is not None and self.state.is_parked
        self.counts["parked_keys"] += int(is_parked) - int(self.was_parked)
        metrics = {name: count for name, count in self.counts.items() if count}
        if metrics:
            self.packed.append(_pack(metrics))
        return pd.DataFrame({"packed": self.packed})


_pack = msgpack.Packer(use_bin_type=True).pack


def unpack(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """`mapInPandas` over the group outputs: records to sink columns, metrics to counters."""
    for frame in frames:
        columns: dict[str, list[Any]] = {field.name: [] for field in UNPACKED_SCHEMA.fields}
        for packed in frame["packed"].tolist():
            item = msgpack.unpackb(packed, raw=False)
            if isinstance(item, dict):
                for name in ("topic", "partition", "key", "value", "headers"):
                    columns[name].append(None)
                for name in COUNTERS:
                    columns[name].append(item.get(name, 0))
                continue
            topic, partition, key, value, headers = item
            columns["topic"].append(topic)
            columns["partition"].append(partition)
            columns["key"].append(key)
            columns["value"].append(value)
            columns["headers"].append([{"key": k, "value": v} for k, v in headers])
            for name in COUNTERS:
                columns[name].append(None)
        yield pd.DataFrame(columns)


def _headers(cells: Any) -> tuple[tuple[str, bytes | None], ...]:
    if cells is None:
        return ()
    return tuple((cell["key"], cell["value"]) for cell in cells)


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
