"""The Spark engine's hydration stage against the empty-function floor, on the same input.

Micro-batches of N Debezium update events over K distinct keys (TOAST column shipped as the
placeholder, so every event is filled from state) go through (a) `applyInPandasWithState` with an
empty function grouped by the record key — Spark's own per-group floor, which emits nothing —
(b) the same with a function that returns its input rows unchanged in the sink's columns,
(c) the same with a function that returns, per group, a `records` cell as large as the engine's
(one hydrated record, ~2x the TOAST column with `before` filled, per event) — the floor of any
stage that must hand every hydrated event back to Spark — and (d) the engine's `hydrate` stage
(routing, the real group function, state; its output is the packed `records` cells the Kafka
sink reads). Input is one parquet file per micro-batch in the Kafka source's schema; output the
`noop` sink for every stage, so none pays the Kafka sink's per-record work (`--breakdown` times
the sink's reading of either layout); RocksDB state; local[2]. A first batch inserts every key
(and starts the Python workers) and is not counted; before the measured runs every stage runs
once at full size over 1k keys (JIT and worker warm-up, not counted).

Run (from the repository root):

    python -m bench.spark_engine                          # K = 1k and 50k, N = 50k
    python -m bench.spark_engine --events 20000 --keys 1000 --batches 2 --json out.json
    python -m bench.spark_engine --keys 1000 --batches 1 --breakdown   # the engine pass by pass
    python -m bench.spark_engine --spark-conf spark.sql.execution.arrow.maxBytesPerBatch=2147483647
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import StructType

from hydrator.core import HydrationSettings, Hydrator, RawRecord
from hydrator.engines.spark.kafka_sink import KafkaStreamWriter, pack_records
from hydrator.engines.spark.kafka_source import SOURCE_SCHEMA
from hydrator.engines.spark.query import QuerySpec, hydrate
from hydrator.engines.spark.routing import routed
from hydrator.engines.spark.session import spark_session
from hydrator.engines.spark.stateful import (
    OUTPUT_SCHEMA,
    STATE_SCHEMA,
    HydratorSpec,
    group_function,
)
from hydrator.formats import codec_for
from hydrator.topology.layout import Topology

TOPIC = "bench.public.items"
PLACEHOLDER = "__debezium_unavailable_value"
HEADERS_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def event(key: int, lsn: int, doc: str | None) -> bytes:
    after = {"id": key, "n": lsn, "doc": doc if doc is not None else PLACEHOLDER}
    source = {"connector": "postgresql", "lsn": lsn, "sequence": f'["{lsn - 1}","{lsn}"]'}
    op = "c" if doc is not None else "u"
    return orjson.dumps({"before": None, "after": after, "source": source, "op": op, "ts_ms": 0})


def write_batch(directory: Path, index: int, keys: list[int], lsn0: int, doc: str | None) -> None:
    n = len(keys)
    table = pa.table(
        {
            "topic": [TOPIC] * n,
            "partition": pa.array([k % 4 for k in keys], pa.int32()),
            "offset": pa.array(range(lsn0, lsn0 + n), pa.int64()),
            "key": [orjson.dumps({"id": k}) for k in keys],
            "value": [event(k, lsn0 + i, doc) for i, k in enumerate(keys)],
            "headers": pa.array([None] * n, HEADERS_ARROW),
            "timestamp": pa.array([0] * n, pa.int64()),
        }
    )
    pq.write_table(table, directory / f"batch-{index:04d}.parquet")


def empty_floor(frame: DataFrame, _spec: QuerySpec) -> DataFrame:
    def nothing(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        for _ in frames:
            pass
        yield pd.DataFrame({"key": []})

    return frame.groupBy("key").applyInPandasWithState(
        nothing, "key binary", "n long", "Append", GroupStateTimeout.NoTimeout
    )


def passthrough_floor(frame: DataFrame, _spec: QuerySpec) -> DataFrame:
    """A function that emits every input row unchanged, in the sink's columns."""
    columns = ["topic", "partition", "key", "value", "headers"]

    def same(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        for rows in frames:
            yield rows[columns]

    schema = StructType([SOURCE_SCHEMA[name] for name in columns])
    return frame.groupBy("key").applyInPandasWithState(
        same, schema, "n long", "Append", GroupStateTimeout.NoTimeout
    )


def hydrated_record(doc_size: int) -> tuple[Any, ...]:
    """What the engine writes for one of the measured updates, in a `records` cell."""
    hydrator = Hydrator(codec_for("debezium"), HydrationSettings())
    key = orjson.dumps({"id": 1})
    insert = RawRecord(TOPIC, 1, 0, key, event(1, 2, "d" * doc_size))
    update = RawRecord(TOPIC, 1, 1, key, event(1, 3, None))
    canonical = '{"id":1}'
    inserted = hydrator.process(None, insert, canonical, 0).state
    (out,) = hydrator.process(inserted, update, canonical, 0).emitted
    return ("out", out.partition, out.key, out.value, out.headers)


def output_floor(frame: DataFrame, _spec: QuerySpec, doc_size: int) -> DataFrame:
    """The empty function that hands back to Spark, per group, a `records` cell as large as the
    engine's (one hydrated record per input event; the engine's output schema): the floor of
    any stage that must return every hydrated event, which the empty floor does not."""
    record = hydrated_record(doc_size)

    def emit(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        events = sum(len(rows) for rows in frames)
        yield pd.DataFrame({"records": [pack_records([record] * events)], "counts": [None]})

    return frame.groupBy("key").applyInPandasWithState(
        emit, OUTPUT_SCHEMA, "n long", "Append", GroupStateTimeout.NoTimeout
    )


def stateful_floor(frame: DataFrame, _spec: QuerySpec) -> DataFrame:
    """The empty function that also keeps a row-sized blob per key, as hydration must."""
    blob = b"s" * 2200

    def keep(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        for _ in frames:
            pass
        state.update((blob,))
        yield pd.DataFrame({"key": []})

    return frame.groupBy("key").applyInPandasWithState(
        keep, "key binary", "s binary", "Append", GroupStateTimeout.NoTimeout
    )


def engine_routing(frame: DataFrame, spec: QuerySpec) -> DataFrame:
    """The engine's first pass alone: routing and packing (mapInArrow), no shuffle."""
    return routed(frame, spec.hydrator, spec.topology.handoff_topic)


def engine_plumbing(frame: DataFrame, spec: QuerySpec) -> DataFrame:
    """Routing, the shuffle and an empty function on the engine's two packed columns."""

    def nothing(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        for _ in frames:
            pass
        yield from ()

    return (
        engine_routing(frame, spec)
        .groupBy("group")
        .applyInPandasWithState(
            nothing, OUTPUT_SCHEMA, "n long", "Append", GroupStateTimeout.NoTimeout
        )
    )


def engine_output_discarded(frame: DataFrame, spec: QuerySpec) -> DataFrame:
    """The whole engine, but the group function's output rows are dropped in Python: what
    handing the hydrated records back to Spark costs is the difference to the engine."""
    hydrate_group = group_function(spec.hydrator, spec.topology)

    def discard(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        for _ in hydrate_group(key, frames, state):
            pass
        yield from ()

    return (
        engine_routing(frame, spec)
        .groupBy("group")
        .applyInPandasWithState(
            discard, OUTPUT_SCHEMA, STATE_SCHEMA, "Append", GroupStateTimeout.ProcessingTimeTimeout
        )
    )


# --breakdown: where the engine's time goes, pass by pass.
BREAKDOWN = {
    "engine: routing only": engine_routing,
    "engine: routing + shuffle + empty function": engine_plumbing,
    "engine, group output discarded": engine_output_discarded,
}
EMPTY = "empty applyInPandasWithState"
PASSTHROUGH = "passthrough applyInPandasWithState"
OUTPUT = "empty + the engine's output bytes"
STAGES: dict[str, Callable[[DataFrame, QuerySpec], DataFrame]] = {
    EMPTY: empty_floor,
    PASSTHROUGH: passthrough_floor,
    OUTPUT: partial(output_floor, doc_size=2000),
    "empty + 2 KB state per key": stateful_floor,
    "hydrator engine": hydrate,
}


@dataclass
class Result:
    stage: str
    events: int
    keys: int
    wall_s: float
    events_per_s: int
    keys_per_s: int


def measure(
    spark: SparkSession, stage: str, events: int, keys: int, batches: int, doc_size: int, work: Path
) -> Result:
    source = Path(tempfile.mkdtemp(prefix="in-", dir=work))
    doc = "d" * doc_size
    write_batch(source, 0, list(range(keys)), 1, doc)
    lsn = keys + 1
    for index in range(1, batches + 1):
        write_batch(source, index, [i % keys for i in range(events)], lsn, None)
        lsn += events
    frame = (
        spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    )
    spec = QuerySpec(
        "unused:9092",
        (TOPIC,),
        Topology("bench", {TOPIC: "out"}, 1),
        str(source) + "-ck",
        HydratorSpec(HydrationSettings()),
    )
    out = STAGES[stage](frame, spec)
    query = (
        out.writeStream.format("noop")
        .outputMode("append")
        .option("checkpointLocation", spec.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    walls = [
        p["durationMs"]["triggerExecution"] / 1000
        for p in query.recentProgress
        if p["numInputRows"]
    ][1:]
    wall = statistics.median(walls)
    return Result(stage, events, keys, round(wall, 2), round(events / wall), round(keys / wall))


def sink_read_us(records: int, per_cell: int, doc_size: int) -> dict[str, float]:
    """µs per record for the Kafka sink to read what it produces from either layout: the
    columns (topic, partition, key, value, headers) or packed `records` cells of `per_cell`."""
    rows = [
        (
            "out",
            n % 4,
            orjson.dumps({"id": n}),
            event(n, n + 2, "d" * doc_size),
            (("hydrator.filled", b"doc"), ("hydrator.source", f"{TOPIC}:{n % 4}:{n}".encode())),
        )
        for n in range(records)
    ]
    names = ["topic", "partition", "key", "value", "headers"]
    columns = pa.RecordBatch.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.string()),
            pa.array([r[1] for r in rows], pa.int32()),
            pa.array([r[2] for r in rows], pa.binary()),
            pa.array([r[3] for r in rows], pa.binary()),
            pa.array([[{"key": k, "value": v} for k, v in r[4]] for r in rows], HEADERS_ARROW),
        ],
        names=names,
    )
    cells = [pack_records(rows[i : i + per_cell]) for i in range(0, records, per_cell)]
    packed = pa.RecordBatch.from_arrays([pa.array(cells, pa.binary())], names=["records"])
    schema = StructType([SOURCE_SCHEMA[name] for name in names])
    writer = KafkaStreamWriter({"kafka.bootstrap.servers": "unused:9092"}, schema)
    timings = {}
    for layout, read in (
        ("columns", lambda: writer._column_rows(columns)),
        ("packed", lambda: KafkaStreamWriter._packed_rows(packed)),
    ):
        start = time.perf_counter()
        for _ in read():
            pass
        timings[layout] = round((time.perf_counter() - start) / records * 1e6, 2)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--keys", default="1000,50000")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--doc-size", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--breakdown", action="store_true", help="also time the engine's passes")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="K=V", help="for every stage"
    )
    args = parser.parse_args()
    STAGES[OUTPUT] = partial(output_floor, doc_size=args.doc_size)
    if args.breakdown:
        STAGES.update(BREAKDOWN)
    conf = dict(item.split("=", 1) for item in args.spark_conf)
    spark = spark_session("spark-engine-bench", "local[2]", 4, conf)
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    results = []
    with tempfile.TemporaryDirectory() as work:
        if not args.no_warmup:  # a full-size round: a short one left the JVM half-compiled
            for stage in STAGES:
                measure(spark, stage, args.events, 1000, 1, args.doc_size, Path(work))
        for keys in [int(k) for k in args.keys.split(",")]:
            for stage in STAGES:
                result = measure(
                    spark, stage, args.events, keys, args.batches, args.doc_size, Path(work)
                )
                results.append(result)
                print(result, file=sys.stderr, flush=True)
    print(
        "| stage | events/batch | distinct keys | batch wall s | events/s | keys/s "
        "| ratio to empty floor | ratio to output floor |"
    )
    print("|---|---|---|---|---|---|---|---|")
    empty = {r.keys: r.events_per_s for r in results if r.stage == EMPTY}
    output = {r.keys: r.events_per_s for r in results if r.stage == OUTPUT}
    for r in results:
        print(
            f"| {r.stage} | {r.events} | {r.keys} | {r.wall_s} | {r.events_per_s} | "
            f"{r.keys_per_s} | {r.events_per_s / empty[r.keys]:.2f} | "
            f"{r.events_per_s / output[r.keys]:.2f} |"
        )
    if args.breakdown:
        for keys in [int(k) for k in args.keys.split(",")]:
            per_cell = max(1, args.events // keys)
            timings = sink_read_us(args.events, per_cell, args.doc_size)
            print(f"Kafka sink reading, µs/record ({per_cell} records per packed cell): {timings}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
