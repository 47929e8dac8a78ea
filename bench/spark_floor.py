"""Floor costs of the Spark engine's building blocks, on this machine, local[2].

1. Stateful floor: micro-batches of N events over K distinct keys through a per-key stateful
   operator whose function does nothing, so what is measured is Spark's own cost per group:
   `applyInPandasWithState`, `transformWithStateInPandas` and `transformWithState` (row API).
   Input is a parquet file per micro-batch (maxFilesPerTrigger=1), output the `noop` sink, state
   in RocksDB (what the engine uses; transformWithState requires it).
2. Kafka I/O (`--kafka-io`): a pre-loaded topic read by the project's Kafka source into the
   `noop` sink (read rate), and copied by source -> sink into another topic (copy rate).

Run (from the repository root):

    python -m bench.spark_floor                       # floor, K = 1k and 50k
    python -m bench.spark_floor --events 20000 --keys 1000,20000 --batches 2
    python -m bench.spark_floor --kafka-io --records 500000 --skip-floor
    python -m bench.spark_floor --kafka-io --bootstrap-servers HOST:PORT

`--kafka-io` starts a throwaway Tansu broker unless --bootstrap-servers is given. Prints markdown
tables; `--json FILE` also writes the figures. Wall times are the micro-batches' own
(`triggerExecution`), after a warm-up batch that starts the Python workers; the first figure
per operator is therefore steady state, not start-up. transformWithState* need protobuf and grpcio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
INPUT_SCHEMA = "key string, value string"
OUTPUT_SCHEMA = "key string, value string"


def spark_session(shuffle_partitions: int) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this interpreter
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("spark-floor")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# -- the stateful operators, each with a function that does nothing -------------------------------


def empty_pandas_with_state(
    key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    for _ in frames:  # the rows must be consumed, as a real function would
        pass
    return iter(())


def apply_in_pandas_with_state(frame: DataFrame) -> DataFrame:
    return frame.groupBy("key").applyInPandasWithState(
        empty_pandas_with_state, OUTPUT_SCHEMA, "seen long", "Update", GroupStateTimeout.NoTimeout
    )


def transform_with_state_in_pandas(frame: DataFrame) -> DataFrame:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Empty(StatefulProcessor):
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
            for _ in rows:
                pass
            return iter(())

        def close(self) -> None:
            pass

    return frame.groupBy("key").transformWithStateInPandas(
        statefulProcessor=Empty(),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Update",
        timeMode="None",
    )


def transform_with_state_rows(frame: DataFrame) -> DataFrame:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Empty(StatefulProcessor):
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
            for _ in rows:
                pass
            return iter(())

        def close(self) -> None:
            pass

    return frame.groupBy("key").transformWithState(
        statefulProcessor=Empty(),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Update",
        timeMode="None",
    )


OPERATORS: dict[str, Callable[[DataFrame], DataFrame]] = {
    "applyInPandasWithState": apply_in_pandas_with_state,
    "transformWithStateInPandas": transform_with_state_in_pandas,
    "transformWithState (rows)": transform_with_state_rows,
}


# -- stateful floor -------------------------------------------------------------------------------


@dataclass
class FloorResult:
    operator: str
    events: int
    keys: int
    batch_wall_s: float
    events_per_s: float
    keys_per_s: float
    ms_per_key: float


def write_batch(directory: Path, index: int, events: int, keys: int) -> None:
    key_column = [f"key-{i % keys:08d}" for i in range(events)]
    table = pa.table({"key": key_column, "value": ["x" * 100] * events})
    pq.write_table(table, directory / f"batch-{index:04d}.parquet")


def batch_walls(query: StreamingQuery) -> list[float]:
    return [
        p["durationMs"]["triggerExecution"] / 1000
        for p in query.recentProgress
        if p["numInputRows"]
    ]


def measure_floor(
    spark: SparkSession, operator: str, events: int, keys: int, batches: int, work: Path
) -> FloorResult:
    source = Path(tempfile.mkdtemp(prefix="in-", dir=work))
    write_batch(source, 0, min(events, 1000), min(keys, 100))  # warm-up: starts the workers
    for index in range(1, batches + 1):
        write_batch(source, index, events, keys)
    frame = (
        spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    )
    query = (
        OPERATORS[operator](frame)
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(source) + "-checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{operator}: {query.exception()}")
    walls = batch_walls(query)[1:]  # drop the warm-up
    wall = statistics.median(walls)
    return FloorResult(
        operator,
        events,
        keys,
        round(wall, 2),
        round(events / wall),
        round(keys / wall),
        round(wall / keys * 1000, 3),
    )


# -- Kafka I/O ------------------------------------------------------------------------------------


@dataclass
class IoResult:
    case: str
    records: int
    wall_s: float
    records_per_s: float


def preload(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1_000_000}
    )
    value = b'{"id": %d, "payload": "' + b"x" * 80 + b'"}'
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value % n, b"%d" % n, n % partitions, headers=[("h", b"1")])
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def run_copy(
    spark: SparkSession, bootstrap: str, source: str, sink: str | None, work: Path
) -> StreamingQuery:
    from hydrator.engines.spark import register

    fmt = register(spark)
    frame = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topics", source)
        .option("startingOffsets", "earliest")
        .load()
    )
    if sink is None:
        writer = frame.writeStream.format("noop")
    else:
        writer = (
            frame.select("key", "value", "headers", "partition")
            .writeStream.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
        )
    checkpoint = work / f"checkpoint-{source}-{sink}"
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return query


def measure_io(
    spark: SparkSession, bootstrap: str, records: int, partitions: int, work: Path
) -> list[IoResult]:
    stamp = int(time.time())
    warm, topic = f"floor-warm-{stamp}", f"floor-in-{stamp}"
    preload(bootstrap, warm, 1000, partitions)
    started = time.monotonic()
    preload(bootstrap, topic, records, partitions)
    produce_wall = time.monotonic() - started
    results = [
        IoResult(
            "confluent-kafka produce (pre-load)",
            records,
            round(produce_wall, 2),
            round(records / produce_wall),
        )
    ]
    run_copy(spark, bootstrap, warm, None, work)  # warm-up: Python workers and their clients
    run_copy(spark, bootstrap, warm, f"{warm}-out", work)
    for case, sink in (("source -> noop", None), ("source -> sink", f"{topic}-out")):
        started = time.monotonic()
        query = run_copy(spark, bootstrap, topic, sink, work)
        wall = time.monotonic() - started
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert rows == records, f"{case}: read {rows} of {records}"
        results.append(IoResult(case, rows, round(wall, 2), round(rows / wall)))
    return results


# -- output ---------------------------------------------------------------------------------------


def markdown(rows: list[Any]) -> str:
    if not rows:
        return ""
    header = list(asdict(rows[0]))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in asdict(r).values()) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000, help="events per micro-batch")
    parser.add_argument("--keys", default="1000,50000", help="distinct keys per micro-batch")
    parser.add_argument("--batches", type=int, default=2, help="measured micro-batches")
    parser.add_argument("--operators", default=",".join(OPERATORS))
    parser.add_argument("--shuffle-partitions", type=int, default=2)
    parser.add_argument("--skip-floor", action="store_true")
    parser.add_argument("--kafka-io", action="store_true")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="spark-floor-"))
    spark = spark_session(args.shuffle_partitions)
    report: dict[str, Any] = {"machine_cpus": os.cpu_count(), "spark": spark.version}
    try:
        if not args.skip_floor:
            floor: list[FloorResult] = []
            for keys in (int(k) for k in args.keys.split(",")):
                for operator in args.operators.split(","):
                    result = measure_floor(spark, operator, args.events, keys, args.batches, work)
                    print(result, file=sys.stderr, flush=True)
                    floor.append(result)
            print("\n### Stateful floor (empty function, local[2], RocksDB state)\n")
            print(markdown(floor))
            report["floor"] = [asdict(r) for r in floor]
        if args.kafka_io:
            broker: AbstractContextManager[Any]
            if args.bootstrap_servers:
                broker = nullcontext(args.bootstrap_servers)
            else:
                from hydrator.kafka.local_broker import LocalBroker

                broker = LocalBroker()
            with broker as running:
                bootstrap = running if isinstance(running, str) else running.bootstrap_servers
                io = measure_io(spark, bootstrap, args.records, args.partitions, work)
            print(f"\n### Kafka I/O ({args.records} records, {args.partitions} partitions)\n")
            print(markdown(io))
            report["kafka_io"] = [asdict(r) for r in io]
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
