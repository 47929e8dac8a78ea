"""The Spark engine's hydration stage against the empty-function floor, on the same input.

Micro-batches of N Debezium update events over K distinct keys (TOAST column shipped as the
placeholder, so every event is filled from state) go through (a) `applyInPandasWithState` with an
empty function grouped by the record key — Spark's own per-group floor — and (b) the engine's
`hydrate` stage (routing UDF + the real group function + state). Input is one parquet file per
micro-batch in the Kafka source's schema; output the `noop` sink; RocksDB state; local[2].
A first batch inserts every key (and starts the Python workers) and is not counted.

Run (from the repository root):

    python bench/spark_engine.py                          # K = 1k and 50k, N = 50k
    python bench/spark_engine.py --events 20000 --keys 1000 --batches 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from hydrator.core import HydrationSettings
from hydrator.engines.spark.kafka_source import SOURCE_SCHEMA
from hydrator.engines.spark.query import QuerySpec, hydrate
from hydrator.engines.spark.session import spark_session
from hydrator.engines.spark.stateful import Topics

TOPIC = "bench.public.items"
PLACEHOLDER = "__debezium_unavailable_value"


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
            "headers": pa.array(
                [None] * n, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
            ),
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


STAGES = {
    "empty applyInPandasWithState": empty_floor,
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
        Topics({TOPIC: "out"}, "h", "dlq"),
        str(source) + "-ck",
        HydrationSettings(),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--keys", default="1000,50000")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--doc-size", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    spark = spark_session("spark-engine-bench", "local[2]", 4)
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    results = []
    with tempfile.TemporaryDirectory() as work:
        for keys in [int(k) for k in args.keys.split(",")]:
            for stage in STAGES:
                result = measure(
                    spark, stage, args.events, keys, args.batches, args.doc_size, Path(work)
                )
                results.append(result)
                print(result, file=sys.stderr, flush=True)
    print("| stage | events/batch | distinct keys | batch wall s | events/s | keys/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    floors = {r.keys: r for r in results if r.stage == "empty applyInPandasWithState"}
    for r in results:
        ratio = r.events_per_s / floors[r.keys].events_per_s
        print(
            f"| {r.stage} | {r.events} | {r.keys} | {r.wall_s} | {r.events_per_s} | "
            f"{r.keys_per_s} | {ratio:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
