"""The Spark engine's re-select stage (docs/cold-start.md, "Re-select fallback").

The group function cannot query per group (one query per key would be a query per record), so
it defers the records whose placeholders nothing can fill (stateful.py, `_GroupStep.defer`):
each with the key's state before it, and behind it everything its key emitted later in the
micro-batch. This stage is a `mapInArrow` right after the group function, over each partition of
its output: rows without deferred records pass on as they come; at the end of the partition, one
query per source table reads every deferred row (the embedded engine's client,
hydrator/reselect/client.py, and its rules, hydrator/core/reselected.py), each deferred record
is hydrated again from its state with what was read (`Hydrator.process`'s `reselected`: outputs,
headers and counters come from the core, as in the embedded engine), and the key's outputs are
written in their order. A deferred handoff (`defer_release`: a key change whose released records
need a re-select) is applied again to its state with what was read for each released record
(`Hydrator.receive_handoff`'s `reselected`).

The state: the group function kept, for a deferred record, the state it leaves without a
re-select (current values are never kept anyway). Where the re-select proved columns exact, the
state it makes goes to the bootstrap topic, keyed `<group>` + RESELECTED_SUFFIX; the query reads
that topic as state-only input and the key's state takes those columns in a later micro-batch
if no later event has applied meanwhile (images.with_reselected). Until then a later event of
the key that needs them is re-selected again.

A database that is slow, failing or unreachable gives nothing (the client never raises and
waits at most its timeouts): the records are hydrated without, under `--on-unresolved`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import pyarrow as pa

from hydrator.core import RawRecord
from hydrator.core.reselected import Reselected, reselected_for
from hydrator.engines.spark.stateful import (
    PENDING_OUTPUTS,
    PENDING_RELEASE,
    RESELECTED_SUFFIX,
    HydratorSpec,
    chunked,
    counts_row,
    hydrator_for,
    unpack_pending,
)
from hydrator.events import Read
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.reselect.client import PostgresReselect, Table
from hydrator.reselect.misses import Miss, miss_of
from hydrator.reselect.settings import ReselectSettings
from hydrator.topology.emit import KafkaRecord, TopicWriter, emit
from hydrator.topology.layout import Topology
from state.codec import decode_state, encode_state
from state.handoff import Handoff
from state.record import StateRecord, state_key

_COLUMNS = ["records", "counts"]
# Room for the record's key and the topic's framing, under a topic's size limit.
RECORD_OVERHEAD = 64 * 1024


@dataclass(frozen=True)
class ReselectSpec:
    """What the stage needs on an executor (pickled with every task). `settings.max_qps` is
    the cap of one partition's client: the engine divides `--reselect-max-qps` among them."""

    settings: ReselectSettings
    hydrator: HydratorSpec
    topology: Topology
    # the largest record the bootstrap topic takes: a larger re-selected state is not written
    max_state_bytes: int


@lru_cache(maxsize=4)
def client_for(settings: ReselectSettings, placeholder: bytes) -> PostgresReselect:
    """One client (one connection, one rate limit, one rest after failures) per Python worker:
    workers are reused across micro-batches."""
    return PostgresReselect(settings, PlaceholderForms(placeholder))


def completion(
    spec: ReselectSpec,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`mapInArrow` function: PENDING_OUTPUT_SCHEMA batches in, OUTPUT_SCHEMA batches out."""

    def complete(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        held: list[bytes] = []
        counts_type: pa.DataType = pa.list_(pa.int64())
        for batch in batches:
            pending = batch.column("pending")
            if pending.null_count < len(pending):
                held += [cell for cell in pending.to_pylist() if cell is not None]
            counts_type = batch.column("counts").type
            yield pa.RecordBatch.from_arrays(
                [batch.column("records"), batch.column("counts")], names=_COLUMNS
            )
        if held:
            cells, counts = _completed(spec, held)
            yield pa.RecordBatch.from_arrays(
                [pa.array(cells, pa.binary()), pa.array(counts, counts_type)], names=_COLUMNS
            )

    return complete


@dataclass
class _Deferred:
    record: RawRecord
    key: str
    state: bytes | None
    columns: tuple[str, ...]
    now_ms: int
    rewritten: bool
    miss: Miss | None

    def wants(self) -> list[tuple[Miss, bool]]:
        miss = self.miss
        return [(miss, self.rewritten)] if miss is not None and miss.shipped else []


@dataclass
class _DeferredRelease:
    """A handoff whose released records wait for a re-select (stateful.py, `defer_release`)."""

    handoff: Handoff
    key: str
    state: bytes
    misses: list[tuple[Miss, bool]]  # each with whether its row was rewritten after it
    now_ms: int

    def wants(self) -> list[tuple[Miss, bool]]:
        return self.misses


def _completed(
    spec: ReselectSpec, cells: list[bytes]
) -> tuple[list[bytes | None], list[list[int | None] | None]]:
    """The partition's deferred records hydrated, with one query per table for all of them:
    OUTPUT_SCHEMA columns."""
    chains = [[_item(item) for item in unpack_pending(cell)] for cell in cells]
    deferred = [
        item for chain in chains for item in chain if isinstance(item, _Deferred | _DeferredRelease)
    ]
    client = client_for(spec.settings, spec.hydrator.format_options.placeholder_bytes)
    stats = client.stats
    before = (stats.queries, stats.failures, stats.skipped)
    found = _reselect(client, [want for item in deferred for want in item.wants()])
    counts = {
        "reselect_queries": stats.queries - before[0],
        "reselect_failures": stats.failures - before[1],
        "reselect_skipped": stats.skipped - before[2],
    }
    hydrator = hydrator_for(spec.hydrator)
    topology = spec.topology
    out: list[KafkaRecord] = []
    sink = TopicWriter(topology, out.append)
    for chain in chains:
        seed: tuple[str, int, str, StateRecord] | None = None
        for item in chain:
            if isinstance(item, list):
                out += item
                continue
            if isinstance(item, _Deferred):
                state = decode_state(item.state) if item.state is not None else None
                reselected = found.get(item.record.source)
                record = item.record
                step = hydrator.process(state, Read(record), item.key, item.now_ms, reselected)
                topic, partition = record.topic, record.partition
                proven = reselected is not None and bool(reselected.exact)
            else:
                handoff = item.handoff
                given = {
                    miss.source: found[miss.source]
                    for miss, _ in item.misses
                    if miss.source in found
                }
                step = hydrator.receive_handoff(
                    decode_state(item.state), handoff, item.now_ms, given
                )
                topic, partition = handoff.topic, topology.handoff_partition(handoff)
                proven = any(chosen.exact for chosen in given.values())
            for name, count in step.counts.items():
                counts[name] = counts.get(name, 0) + count
            emit(step, topic, topology, sink)
            if proven and step.state is not None:
                seed = topic, partition, item.key, step.state
        if seed is not None:
            written = _seed_record(spec, *seed)
            if written is not None:
                out.append(written)
    cells_out = chunked(out) or [None]
    rows: list[list[int | None] | None] = [None] * (len(cells_out) - 1)
    return cells_out, [*rows, counts_row(counts)]


def _item(item: tuple[Any, ...]) -> _Deferred | _DeferredRelease | list[KafkaRecord]:
    if item[0] == PENDING_OUTPUTS:
        return [tuple(r) for r in item[1]]
    if item[0] == PENDING_RELEASE:
        _, state, encoded, key, wanted, now_ms = item
        before = decode_state(state)
        parked = {record.source: record for record in before.parked}
        misses = []
        for source, columns, rewritten in wanted:
            miss = miss_of(parked[source], key, tuple(columns))
            if miss is not None:
                misses.append((miss, bool(rewritten)))
        return _DeferredRelease(Handoff.decode(encoded), key, state, misses, now_ms)
    _, state, row, key, columns, now_ms, rewritten = item
    topic, partition, offset, record_key, value, headers, timestamp = row
    record = RawRecord(topic, partition, offset, record_key, value, headers or (), timestamp)
    columns = tuple(columns)
    return _Deferred(record, key, state, columns, now_ms, rewritten, miss_of(record, key, columns))


def _reselect(client: PostgresReselect, wants: list[tuple[Miss, bool]]) -> dict[str, Reselected]:
    """What the source gives each deferred record (by its source): one query per table."""
    tables: dict[tuple[str, str, tuple[str, ...]], list[tuple[Miss, bool]]] = defaultdict(list)
    for miss, rewritten in wants:
        tables[(miss.schema, miss.table, miss.key_columns)].append((miss, rewritten))
    found: dict[str, Reselected] = {}
    for (schema, table, key_columns), group in tables.items():
        shipped: dict[str, Any] = {}
        for miss, _ in group:
            shipped.update(miss.shipped)
        keys = [miss.key for miss, _ in group]
        rows = client.fetch(Table(schema, table), key_columns, keys, shipped)
        if rows is None:
            continue  # the columns fall back to --on-unresolved
        for miss, rewritten in group:
            chosen = reselected_for(rows.get(miss.key), tuple(miss.shipped), miss.tx_id, rewritten)
            if chosen is not None:
                found[miss.source] = chosen
    return found


def _seed_record(
    spec: ReselectSpec, topic: str, partition: int, key: str, state: StateRecord
) -> KafkaRecord | None:
    """The bootstrap-topic record that carries a re-select's exact columns to the key's state
    (None when it would not fit the topic: the next event of the key re-selects them again)."""
    seed = StateRecord(image=state.image, pos=state.pos, updated_at_ms=state.updated_at_ms)
    value = encode_state(seed)
    if len(value) > spec.max_state_bytes:
        return None
    group = state_key(topic, key) + RESELECTED_SUFFIX.encode()
    return (spec.topology.bootstrap_topic, partition, group, value, ())


def partition_settings(settings: ReselectSettings, partitions: int) -> ReselectSettings:
    """`--reselect-max-qps` shared among the query's partitions (each has a client of its
    own), so that all of them together stay under it."""
    if settings.max_qps is None:
        return settings
    return replace(settings, max_qps=settings.max_qps / max(1, partitions))
