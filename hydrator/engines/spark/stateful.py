"""The per-key step of the Spark engine: `applyInPandasWithState` around the pure core.

Rows reach a group already routed and packed (routing.py: one binary column per record) and are
sorted here by (kind, partition, offset); the function decodes the group's StateRecord, feeds
every record to the Hydrator, and returns the records to write plus its counters. No rule lives
here: this is plumbing between Spark's GroupState and `Hydrator.process / receive_handoff / tick`.

Spark's cost is per group and per column, so a group's records to write are packed into as few
binary cells as their size allows (usually one), in the Kafka sink's `records` layout: the sink
unpacks them as it produces, and no pass turns them into columns. The group's counters ride on
its last row, as an array Spark sums into the query's observed metrics.

With --reselect, a record whose placeholders nothing can fill is not hydrated here: the group
function cannot query per key, so it defers the record, with what the key emits after it, to the
stage that follows (reselect.py, one query per table and partition), in a third column. So does
a handoff whose released records (a key change's CREATE and what was parked behind it) have
such placeholders: a handoff without the old image is a miss like any other.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import msgpack
import numpy as np
import pandas as pd
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from hydrator.core import DeadLetter, HydrationSettings, Hydrator, RawRecord, Transition
from hydrator.core.counters import counters_of
from hydrator.core.hydrator import failure_reason, read_handoff, rejected
from hydrator.core.settings import UnresolvedColumnsError
from hydrator.engines.spark.clock import gate_is_open
from hydrator.engines.spark.kafka_sink import pack_records
from hydrator.events import Read
from hydrator.formats import FormatOptions, codec_for
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.reselect.misses import Miss, MissFinder, tx_id_of
from hydrator.seeding import images
from hydrator.topology.emit import KafkaRecord, TopicWriter, emit
from hydrator.topology.layout import Topology
from state.codec import decode_state, encode_state
from state.handoff import Handoff
from state.large import DEFAULT_COMPRESSION, DEFAULT_THRESHOLD, outline
from state.record import StateRecord

log = logging.getLogger("hydrator.spark")

KIND_INPUT = 0
KIND_HANDOFF = 1
# A record of the `<application-id>-bootstrap` topic (hydrator state bootstrap): a state record
# for its group, merged before the group's inputs (images.merged: never over the stream's).
KIND_BOOTSTRAP = -1
# The key of a bootstrap-topic record a re-select wrote (reselect.py) ends with this after the
# group: a state the stream made at that record's position takes its exact columns
# (images.with_reselected). Its own key, so compaction never drops a bootstrapped row for it.
RESELECTED_SUFFIX = "\x00reselected"
_RESELECTED_SUFFIX = RESELECTED_SUFFIX.encode()
STATE_SCHEMA_VERSION = 1

# What GroupState keeps per key: the schema version, then the state codec's own versioned bytes.
STATE_SCHEMA = StructType(
    [StructField("version", IntegerType()), StructField("record", BinaryType())]
)
# Per group call, one or more rows: `records`, a Kafka sink cell (kafka_sink.pack_records, at
# most CHUNK_RECORDS records or about CHUNK_BYTES, so Spark's output Arrow batches stay bounded),
# and on the last row `counts`, the COUNTERS in order.
CHUNK_RECORDS = 256
CHUNK_BYTES = 256 * 1024
# The run's counters (hydrator/core/counters.py), then two changes that move gauges when summed
# (not counters: they also fall): in the number of parked keys, and in the bytes of the state
# store's keys and encoded states.
PARKED_KEYS_CHANGE = "parked_keys"
STATE_BYTES_CHANGE = "state_bytes"
COUNTERS = (
    *(spec.name for spec in counters_of("spark")),
    PARKED_KEYS_CHANGE,
    STATE_BYTES_CHANGE,
)
# After the counters on the same row, not summed: the earliest timeout the group armed, as the
# wall-clock moment (ms) Spark may fire it from; the query keeps the minimum (timeouts.py).
NEXT_TIMEOUT = "next_timeout_ms"
OUTPUT_SCHEMA = StructType(
    [StructField("records", BinaryType()), StructField("counts", ArrayType(LongType()))]
)
# With --reselect, a third column: the group's records that wait for a re-select, and everything
# the group emitted after the first of them (`_GroupStep.pending_cell`); reselect.py completes
# them and returns OUTPUT_SCHEMA rows.
PENDING_OUTPUT_SCHEMA = StructType([*OUTPUT_SCHEMA.fields, StructField("pending", BinaryType())])
PENDING_RESELECT = "r"
PENDING_RELEASE = "h"
PENDING_OUTPUTS = "o"


@dataclass(frozen=True)
class HydratorSpec:
    """What an executor builds its Hydrator from, the same way the embedded engine does: small,
    picklable, shipped with every task."""

    settings: HydrationSettings = field(default_factory=HydrationSettings)
    format: str = "auto"
    format_options: FormatOptions = field(default_factory=FormatOptions)
    # Column values over this many bytes are kept as references in the key's state (None: as is).
    large_value_threshold: int | None = DEFAULT_THRESHOLD
    large_value_compression: str = DEFAULT_COMPRESSION


@lru_cache(maxsize=8)
def hydrator_for(spec: HydratorSpec) -> Hydrator:
    """One Hydrator per Python worker and configuration (workers are reused across batches)."""
    return Hydrator(codec_for(spec.format, spec.format_options), spec.settings)


def group_function(
    spec: HydratorSpec,
    topology: Topology,
    clock_offset_ms: int = 0,
    catch_up_gate: tuple[str, str] | None = None,
    reselect: bool = False,
) -> Callable[[tuple[Any, ...], Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]:
    """The group function; it dates states and reads timeouts in processing time, the wall
    clock minus `clock_offset_ms` (the downtime so far: clock.py). Spark arms its timeouts by
    the wall clock, so after downtime they fire early: `tick` then finds nothing due, and the
    timeout is armed again for what remains. Until the `catch_up_gate` (gate file, engine run)
    opens, a timeout re-arms without `tick`: the query has not yet read what was waiting.
    With `reselect` it returns PENDING_OUTPUT_SCHEMA rows (`_GroupStep.defer`)."""

    def hydrate_group(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        hydrator = hydrator_for(spec)
        stored_before = _stored_bytes(key[0], state)
        loaded, unreadable = _load(state)
        finder = miss_finder(spec) if reselect else None
        step = _GroupStep(hydrator, topology, key[0], loaded, finder)
        if unreadable:
            step.counts["state_unreadable"] = 1
        now_ms = int(time.time() * 1000) - clock_offset_ms
        if state.hasTimedOut and (catch_up_gate is None or gate_is_open(*catch_up_gate)):
            step.apply(hydrator.tick(step.state, now_ms) if step.state else Transition(None))
        step.feed(packed_records(frames), now_ms)
        stored_image = loaded.image if loaded is not None else None
        final = _outlined(step.final_state(), spec, stored_image)
        deadline = _store(state, final, hydrator, now_ms)
        stored_change = _stored_bytes(key[0], state) - stored_before
        if stored_change:
            step.counts[STATE_BYTES_CHANGE] = stored_change
        cells, counts = step.result(None if deadline is None else deadline + clock_offset_ms)
        if reselect:
            pending = step.pending_cell()
            if pending is not None:
                if not cells:
                    cells, counts = [None], [None]
                yield _output_frame(cells, counts, [None] * (len(cells) - 1) + [pending])
            elif cells:
                yield _output_frame(cells, counts, [None] * len(cells))
        elif cells:
            yield _output_frame(cells, counts)

    return hydrate_group


@lru_cache(maxsize=8)
def miss_finder(spec: HydratorSpec) -> MissFinder:
    hydrator = hydrator_for(spec)
    return MissFinder(hydrator, PlaceholderForms(spec.format_options.placeholder_bytes))


def packed_records(frames: Iterator[pd.DataFrame]) -> list[bytes]:
    """The group's `record` cells. PySpark makes each chunk of a group's rows a DataFrame only
    as the function pulls it, by concatenating the chunk's column Series, which costs about as
    much per group as the rest of the hydration of a one-event group. When `frames` is that lazy
    generator (PySpark 4's `pd.concat(x, axis=1) for x in ...`), the Series are read from its
    source instead; anything else - a list, a timed-out group's empty frame, another PySpark - is
    read as frames."""
    source = _series_chunks(frames)
    records: list[bytes] = []
    if source is None:
        for frame in frames:
            if len(frame):
                records += frame["record"].tolist()
        return records
    for chunk in source:
        column = next((s for s in chunk if isinstance(s, pd.Series) and s.name == "record"), None)
        if column is None:  # not the chunk expected: make the frame PySpark would have made
            column = pd.concat(chunk, axis=1)["record"]
        records += column.tolist()
    return records


def _series_chunks(frames: Iterator[pd.DataFrame]) -> Iterator[Any] | None:
    """The source of PySpark's not yet started generator of a group's frames, or None."""
    code = getattr(frames, "gi_code", None)
    if (
        code is None
        or code.co_name != "<genexpr>"
        or not code.co_filename.endswith(_PYSPARK_WORKER)
        or inspect.getgeneratorstate(frames) != inspect.GEN_CREATED  # type: ignore[arg-type]
    ):
        return None
    source = frames.gi_frame.f_locals.get(".0")  # type: ignore[attr-defined]
    return source if hasattr(source, "__next__") else None


_PYSPARK_WORKER = os.path.join("pyspark", "worker.py")
_OUTPUT_COLUMNS = pd.Index(OUTPUT_SCHEMA.fieldNames())


_PENDING_COLUMNS = pd.Index(PENDING_OUTPUT_SCHEMA.fieldNames())


def _output_frame(
    cells: list[bytes | None],
    counts: list[list[int | None] | None],
    pending: list[bytes | None] | None = None,
) -> pd.DataFrame:
    """OUTPUT_SCHEMA rows (PENDING_OUTPUT_SCHEMA with `pending`) as a frame of one object block:
    Spark pays a per-group cost for the frame a group returns, and one 2-D block takes about a
    third of what a dict of columns does to build, and less to concatenate."""
    width = 2 if pending is None else 3
    block = np.empty((len(cells), width), dtype=object)
    block[:, 0] = cells
    for row, count in enumerate(counts):
        block[row, 1] = count  # one by one: numpy would read a list of lists as a 2-D array
    if pending is not None:
        block[:, 2] = pending
    return pd.DataFrame(
        block, columns=_OUTPUT_COLUMNS if pending is None else _PENDING_COLUMNS, copy=False
    )


def unpack_record(packed: bytes) -> tuple[Any, ...]:
    """A routed record (routing.ROUTED_SCHEMA): kind, partition, offset, topic, key, value,
    headers, timestamp."""
    return msgpack.unpackb(packed, raw=False, use_list=False)


def _order(row: tuple[Any, ...]) -> tuple[int, int, int]:
    return row[0], row[1], row[2]


class _GroupStep:
    """Accumulates the outputs of one group call."""

    def __init__(
        self,
        hydrator: Hydrator,
        topology: Topology,
        group: str,
        state: StateRecord | None,
        finder: MissFinder | None = None,
    ) -> None:
        self.hydrator = hydrator
        self.topology = topology
        # keyless records, undecodable keys and ticks (routing.py) keep no state
        self.stateless = not group or group[0] in "\x01\x02\x03"
        input_topic, _, key = group.lstrip("\x01\x02").partition("\x00")
        # the canonical key routing computed (a stateful group is `<topic>\x00<key>`)
        self.key = None if self.stateless else key
        self.input_topic = input_topic
        self.state = state
        self.was_parked = state is not None and state.is_parked
        # the records to write, in the Kafka sink's `records` layout
        self.out: list[KafkaRecord] = []
        self.sink = TopicWriter(topology, self._write)
        self._target = self.out  # where emitted records go: `out`, or after a deferred record
        self.counts: dict[str, int] = {}
        # --reselect: the records deferred to the re-select stage, and what was emitted after
        # each (`defer`); the transaction ids of the inputs fed since the first was deferred
        self.finder = finder if not self.stateless else None
        self.pending: list[list[Any]] = []
        self._inputs_since: list[int | None] = []

    def feed(self, packed: list[bytes], now_ms: int) -> None:
        """The group's routed records, in (kind, partition, offset) order: inputs, then the
        handoffs for this key (a CREATE parked by an input meets its handoff in the same call)."""
        hydrator = self.hydrator
        for kind, partition, offset, topic, key, value, headers, timestamp in sorted(
            self._unpacked(packed), key=_order
        ):
            if kind == KIND_BOOTSTRAP:
                if key is not None and key.endswith(_RESELECTED_SUFFIX):
                    self._reselected(value)
                else:
                    self._bootstrap(value)
                continue
            record = RawRecord(topic, partition, offset, key, value, headers or (), timestamp)
            if kind == KIND_HANDOFF:
                if key is None:
                    continue  # a tick: it only made this batch run
                handoff = read_handoff(record)
                if isinstance(handoff, DeadLetter):
                    failed = Transition(self.state, dead=(handoff,), counts={"dead_letters": 1})
                    self.apply(failed)
                    continue
                if self.finder is None:
                    self.apply(hydrator.receive_handoff(self.state, handoff, now_ms))
                else:
                    self._handoff(handoff, now_ms)
                continue
            read = Read(record)  # one parse for route and process
            # only a stateless group can hold an undecodable key; others were routed by it
            routed = hydrator.route(read) if self.stateless else None
            if isinstance(routed, DeadLetter):
                self.apply(rejected(routed))
                continue
            if self.finder is None:
                self.apply(hydrator.process(self.state, read, self.key, now_ms))
            else:
                self._input(read, now_ms)

    def _input(self, read: Read, now_ms: int) -> None:
        """An input record under --reselect: hydrated as usual, or, when it leaves columns
        unresolved that the source could give, deferred (`defer`)."""
        record = read.record
        if self.pending:
            self._inputs_since.append(tx_id_of(record))
        state = self.state
        failed: UnresolvedColumnsError | None = None
        step: Transition | None = None
        try:
            step = self.hydrator.process(state, read, self.key, now_ms)
        except UnresolvedColumnsError as exc:  # --on-unresolved fail: unless the source fills it
            failed = exc
        if step is None or step.counts.get("unresolved_events"):
            assert self.finder is not None and self.key is not None
            if self.finder.may_miss(record):
                scratch, miss = self.finder.find(state, Read(record), self.key, now_ms)
                if miss is not None:
                    self.defer(state, record, tuple(miss.shipped), (step or scratch).state, now_ms)
                    return
        if step is None:
            assert failed is not None
            raise failed
        self.apply(step)

    def _handoff(self, handoff: Handoff, now_ms: int) -> None:
        """A handoff under --reselect: applied as usual, or, when a record it releases (the key
        change's CREATE, what was parked behind it) leaves columns unresolved that the source
        could give, deferred with them (`defer_release`): a handoff without the old image is a
        miss like any other."""
        assert self.finder is not None
        state = self.state
        failed: UnresolvedColumnsError | None = None
        step: Transition | None = None
        try:
            step = self.hydrator.receive_handoff(state, handoff, now_ms)
        except UnresolvedColumnsError as exc:  # --on-unresolved fail: unless the source fills it
            failed = exc
        if step is None or step.counts.get("unresolved_events"):
            scratch, misses = self.finder.find_released(state, handoff, now_ms)
            if misses:
                assert state is not None  # records were released: they were parked in it
                self.defer_release(state, handoff, misses, (step or scratch).state, now_ms)
                return
        if step is None:
            assert failed is not None
            raise failed
        self.apply(step)

    def defer_release(
        self,
        before: StateRecord,
        handoff: Handoff,
        misses: list[Miss],
        after: StateRecord | None,
        now_ms: int,
    ) -> None:
        """Leave `handoff` to the re-select stage (reselect.py), which applies it again to
        `before` with what it reads for the `misses` of the records it releases, as `defer`
        does for one record. `rewritten` (per miss): a later record it releases comes from the
        same transaction."""
        txs = [tx_id_of(record) for record in before.parked]
        index = {record.source: i for i, record in enumerate(before.parked)}
        wanted = []
        for miss in misses:
            i = index[miss.source]
            rewritten = miss.tx_id is not None and miss.tx_id in txs[i + 1 :]
            wanted.append([miss.source, list(miss.shipped), rewritten])
        state = encode_state(before)
        self.pending.append([PENDING_RELEASE, state, handoff.encode(), self.key, wanted, now_ms])
        self._target = []
        self.pending.append([PENDING_OUTPUTS, self._target])
        self.state = after

    def defer(
        self,
        before: StateRecord | None,
        record: RawRecord,
        columns: tuple[str, ...],
        after: StateRecord | None,
        now_ms: int,
    ) -> None:
        """Leave `record` to the re-select stage (reselect.py), which hydrates it again from
        `before` with what it reads for `columns`, and writes and counts what that gives. The
        key's state goes on as the record leaves it without a re-select: the exact columns reach
        it through the bootstrap topic. Everything the group emits after it waits behind it, so
        no later record of the key overtakes it (a later one the state cannot fill either is
        deferred too, and read by the same query)."""
        if not self.pending:
            self._inputs_since.append(tx_id_of(record))
        position = len(self._inputs_since) - 1
        state = encode_state(before) if before is not None else None
        row = (
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value,
            record.headers,
            record.timestamp_ms,
        )
        self.pending.append([PENDING_RESELECT, state, row, self.key, columns, now_ms, position])
        self._target = []
        self.pending.append([PENDING_OUTPUTS, self._target])
        self.state = None if self.stateless else after

    def pending_cell(self) -> bytes | None:
        """The deferred records and what followed them, msgpack-packed: a list of
        [PENDING_RESELECT, state before (encoded) or None, (topic, partition, offset, key, value,
        headers, timestamp), canonical key, columns, now_ms, rewritten],
        [PENDING_RELEASE, state before (encoded), handoff (encoded), canonical key, [[released
        record's source, columns, rewritten], ...], now_ms] and [PENDING_OUTPUTS, records to
        write], in order. `rewritten`: a later input of the key in this batch comes from the
        same transaction (the row read cannot prove its value at this one)."""
        if not self.pending:
            return None
        txs = self._inputs_since
        items: list[list[Any]] = []
        for item in self.pending:
            if item[0] == PENDING_OUTPUTS:
                if item[1]:
                    items.append(item)
                continue
            if item[0] == PENDING_RELEASE:
                items.append(item)
                continue
            position = item[6]
            tx = txs[position]
            item[6] = tx is not None and tx in txs[position + 1 :]
            items.append(item)
        return _pack_pending(items)

    def _write(self, record: KafkaRecord) -> None:
        self._target.append(record)

    def _bootstrap(self, value: bytes | None) -> None:
        """A bootstrapped state record for this key: taken unless the key's state is the
        stream's (or the same row again); one that does not decode is counted and ignored."""
        if self.stateless or value is None:
            return
        try:
            record = decode_state(value)
        except Exception as exc:
            log.warning("skipping a bootstrap record that does not decode: %s", failure_reason(exc))
            self.counts["state_unreadable"] = self.counts.get("state_unreadable", 0) + 1
            return
        chosen = images.merged(self.state, record)
        if chosen is not None:
            self.state = chosen
            self.counts["bootstrapped_keys"] = self.counts.get("bootstrapped_keys", 0) + 1

    def _reselected(self, value: bytes | None) -> None:
        """The state a re-select made for this key (reselect.py): its exact columns join the
        key's state when no later event applied since (images.with_reselected)."""
        if self.stateless or value is None:
            return
        try:
            record = decode_state(value)
        except Exception as exc:
            log.warning(
                "skipping a re-selected state that does not decode: %s", failure_reason(exc)
            )
            self.counts["state_unreadable"] = self.counts.get("state_unreadable", 0) + 1
            return
        chosen = images.with_reselected(self.state, record)
        if chosen is not None:
            self.state = chosen

    def _unpacked(self, packed: list[bytes]) -> list[tuple[Any, ...]]:
        """The routed rows; one that does not unpack (routing wrote it, so this is not the
        input's doing) is logged and counted, and the others go on."""
        rows = []
        for cell in packed:
            try:
                row = unpack_record(cell)
                if len(row) != 8:
                    raise ValueError(f"{len(row)} fields, not 8")
                rows.append(row)
            except Exception as exc:
                log.warning("skipping a routed row that does not unpack: %s", failure_reason(exc))
                self.counts["rows_unreadable"] = self.counts.get("rows_unreadable", 0) + 1
        return rows

    def apply(self, transition: Transition) -> None:
        self.state = None if self.stateless else transition.state
        counts = self.counts
        for name, count in transition.counts.items():
            counts[name] = counts.get(name, 0) + count
        emit(transition, self.input_topic, self.topology, self.sink)

    def final_state(self) -> StateRecord | None:
        return None if self.stateless else self.state

    def result(
        self, next_timeout_ms: int | None = None
    ) -> tuple[list[bytes | None], list[list[int | None] | None]]:
        """The group's output rows (OUTPUT_SCHEMA) as columns: its records to write in few
        cells, one per group unless its output is large, and on the last row its counters and
        the timeout it armed (NEXT_TIMEOUT, wall clock)."""
        is_parked = self.state is not None and self.state.is_parked
        change = int(is_parked) - int(self.was_parked)
        if change:
            self.counts[PARKED_KEYS_CHANGE] = self.counts.get(PARKED_KEYS_CHANGE, 0) + change
        counts = self.counts
        metrics: list[int | None] | None = None
        if any(counts.values()) or next_timeout_ms is not None:
            metrics = [*(counts.get(name, 0) for name in COUNTERS), next_timeout_ms]
        cells = chunked(self.out)
        if metrics is None:
            return cells, [None] * len(cells)
        if not cells:
            cells.append(None)
        return cells, [None] * (len(cells) - 1) + [metrics]


def chunked(out: list[KafkaRecord]) -> list[bytes | None]:
    """Records to write as `records` cells of at most CHUNK_RECORDS records or about
    CHUNK_BYTES."""
    cells: list[bytes | None] = []
    start = size = 0
    for index, (_, _, key, value, _) in enumerate(out):
        size += len(value or b"") + len(key or b"") + 64
        if size >= CHUNK_BYTES or index - start + 1 >= CHUNK_RECORDS:
            cells.append(pack_records(out[start : index + 1]))
            start, size = index + 1, 0
    if start < len(out):
        cells.append(pack_records(out[start:]))
    return cells


def counts_row(counts: Mapping[str, int]) -> list[int | None] | None:
    """A `counts` cell: the COUNTERS in order and no timeout (None when all are 0)."""
    if not any(counts.values()):
        return None
    return [*(counts.get(name, 0) for name in COUNTERS), None]


_pack_pending = msgpack.Packer(use_bin_type=True).pack


def unpack_pending(cell: bytes) -> list[tuple[Any, ...]]:
    items: list[tuple[Any, ...]] = msgpack.unpackb(cell, raw=False, use_list=False)
    return items


def _stored_bytes(group: str, state: GroupState) -> int:
    """What the key's state takes: its group key and encoded record (0 without state)."""
    if not state.exists:
        return 0
    try:
        return len(group.encode()) + len(state.get[1])
    except Exception:  # what _load reports as unreadable
        return 0


def _load(state: GroupState) -> tuple[StateRecord | None, bool]:
    """The key's state, and whether what Spark kept could not be read: that is warned about,
    counted, and the key starts again without state, so one damaged state record cannot stop
    the query."""
    if not state.exists:
        return None, False
    try:
        version, record = state.get
        if version != STATE_SCHEMA_VERSION:
            raise ValueError(f"Spark state schema version {version}, this release reads 1")
        return decode_state(record), False
    except Exception as exc:
        log.warning("state of a key is unreadable, starting it afresh: %s", failure_reason(exc))
        return None, True


def _outlined(
    record: StateRecord | None, spec: HydratorSpec, stored_image: Mapping[str, Any] | None
) -> StateRecord | None:
    """`record` with its large values compressed, inline: Spark writes a key's whole state on
    every update anyway, so keeping them apart would save nothing; compressing them does, and a
    value the stored image held (the same object, or the same digest) keeps its compressed
    bytes instead of being compressed again."""
    threshold = spec.large_value_threshold
    if record is None or threshold is None or type(record.image) is not dict:
        return record
    image = outline(record.image, threshold, stored_image, spec.large_value_compression)
    return replace(record, image=image)


def _store(
    state: GroupState, record: StateRecord | None, hydrator: Hydrator, now_ms: int
) -> int | None:
    """Keep `record` as the key's state, with its timeout armed; returns the timeout's deadline
    (processing time), None when none is armed."""
    if record is None:
        if state.exists:
            state.remove()
        return None
    state.update((STATE_SCHEMA_VERSION, encode_state(record)))
    deadline = hydrator.next_deadline_ms(record)
    if deadline is not None:
        state.setTimeoutDuration(max(deadline - now_ms, 1))
    return deadline
