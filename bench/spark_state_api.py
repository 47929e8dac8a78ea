"""What a key's state costs through Spark's Python state API when many keys share a group.

The Spark engine pays a fixed cost per group Spark hands to Python, and a micro-batch of change
events holds about one event per key, so grouping by key costs a group per event. Grouping by a
bucket of keys instead makes the per-key state calls the cost: `transformWithStateInPandas`
keeps state in the executor's JVM and each call of PySpark's handle is a request over a local
socket, answered before the next one is sent. This measures those calls on their own.

Micro-batches of N events over K keys (by default one event per key) grouped by B buckets; per
key the processor makes, by mode:

  none         nothing (the operator's own cost with B groups)
  map          MapState getValue + updateValue, the user key the key (public API: 2 calls; the
               key's timers could only be the bucket's)
  value        ValueState under the key itself: point the store at the key (PySpark's client
               call, not public API), get, update (3 calls; timers per key)
  value-burst  the same requests, those of --burst keys written before their answers are read

Each value is --value-bytes of random bytes, as binary, or as base64 text with --text (the JVM
pickles a binary value it hands to Python as a Latin-1 string re-encoded as UTF-8). Input is a
parquet file per micro-batch, output the `noop` sink, state in RocksDB, local[2], a warm-up
batch first (not counted). Prints per mode the median batch wall, events/s, and the Python time
per key spent in the processor (its wait for the JVM included).

Run (from the repository root):

    python -m bench.spark_state_api                        # 20k events, 20k keys, 64 buckets
    python -m bench.spark_state_api --modes none,value-burst --text --events 50000 --keys 50000
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.serializers import write_int
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from bench.spark_floor import batch_walls
from hydrator.engines.spark.session import spark_session

MODES = ("none", "map", "value", "value-burst")


class PerKeyState(StatefulProcessor):
    """Reads and writes one value per key of a bucket, as `mode` says."""

    def __init__(self, mode: str, value: Any, text: bool, burst: int) -> None:
        self.mode, self.value, self.text, self.burst = mode, value, text, burst

    def init(self, handle: StatefulProcessorHandle) -> None:
        kind = "string" if self.text else "binary"
        self.handle = handle
        self.map = handle.getMapState("rows", "key string", f"value {kind}")
        self.values = handle.getValueState("row", f"value {kind}")
        self.client = handle._statefulProcessorApiClient

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Any:
        started = time.perf_counter()
        keys = [k for frame in rows for k in frame["key"].tolist()]
        if self.mode == "map":
            for k in keys:
                self.map.getValue((k,))
                self.map.updateValue((k,), (self.value,))
        elif self.mode == "value":
            for k in keys:
                self.client.set_implicit_key((k,))
                self.values.get()
                self.values.update((self.value,))
        elif self.mode == "value-burst":
            for start in range(0, len(keys), self.burst):
                self._burst(keys[start : start + self.burst])
        used_us = int((time.perf_counter() - started) * 1e6)
        yield pd.DataFrame({"keys": [len(keys)], "python_us": [used_us]})

    def _burst(self, keys: list[str]) -> None:
        """get for each key, then update for each key: requests first, answers after."""
        import pyspark.sql.streaming.proto.StateMessage_pb2 as m

        client = self.client

        def set_key(k: str) -> bytes:
            data = client._serialize_to_bytes(client.key_schema, (k,))
            request = m.ImplicitGroupingKeyRequest(setImplicitKey=m.SetImplicitKey(key=data))
            return bytes(m.StateRequest(implicitGroupingKeyRequest=request).SerializeToString())

        def variable(call: Any) -> bytes:
            request = m.StateVariableRequest(valueStateCall=call)
            return bytes(m.StateRequest(stateVariableRequest=request).SerializeToString())

        get = variable(m.ValueStateCall(stateName="row", get=m.Get()))
        data = client._serialize_to_bytes(self.values._valueStateClient.schema, (self.value,))
        update = variable(
            m.ValueStateCall(stateName="row", valueStateUpdate=m.ValueStateUpdate(value=data))
        )
        for second in (get, update):
            requests = [r for k in keys for r in (set_key(k), second)]
            for request in requests:
                write_int(0, client.sockfile)
                write_int(len(request), client.sockfile)
                client.sockfile.write(request)
            client.sockfile.flush()
            for _ in requests:
                status, error, value = client._receive_proto_message()
                if status != 0:
                    raise RuntimeError(error)
                if value and second is get:
                    client._deserialize_from_bytes(value)

    def close(self) -> None:
        pass


@dataclass
class Result:
    mode: str
    events: int
    keys: int
    buckets: int
    value: str
    batch_wall_s: float
    events_per_s: int
    python_us_per_key: float


def write_batch(directory: Path, index: int, events: int, keys: int, buckets: int) -> None:
    names = [f"key-{n % keys:08d}" for n in range(events)]
    table = pa.table(
        {"bucket": [str(zlib.crc32(k.encode()) % buckets) for k in names], "key": names}
    )
    pq.write_table(table, directory / f"batch-{index:04d}.parquet")


def measure(spark: SparkSession, mode: str, args: argparse.Namespace, work: Path) -> Result:
    source = Path(tempfile.mkdtemp(prefix="in-", dir=work))
    write_batch(source, 0, 1000, 100, args.buckets)  # warm-up: starts the workers
    for index in range(1, args.batches + 1):
        write_batch(source, index, args.events, args.keys, args.buckets)
    raw = os.urandom(args.value_bytes)
    value = base64.b64encode(raw).decode() if args.text else raw
    frame = (
        spark.readStream.schema("bucket string, key string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
    )
    used: dict[int, int] = {}

    def per_batch(batch: DataFrame, batch_id: int) -> None:
        total = batch.agg(F.sum("python_us")).first()
        used[batch_id] = (total[0] if total is not None else 0) or 0

    query = (
        frame.groupBy("bucket")
        .transformWithStateInPandas(
            statefulProcessor=PerKeyState(mode, value, args.text, args.burst),
            outputStructType="keys long, python_us long",
            outputMode="Update",
            timeMode="ProcessingTime",
        )
        .writeStream.foreachBatch(per_batch)
        .option("checkpointLocation", str(source) + "-checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{mode}: {query.exception()}")
    batches = [p for p in query.recentProgress if p["numInputRows"]][1:]
    wall = statistics.median(batch_walls(query)[1:])  # the first, the warm-up, dropped
    python_us = statistics.median(used.get(p["batchId"], 0) for p in batches)
    return Result(
        mode,
        args.events,
        args.keys,
        args.buckets,
        f"{args.value_bytes} B {'base64 text' if args.text else 'binary'}",
        round(wall, 2),
        round(args.events / wall),
        round(python_us / args.events, 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events per micro-batch")
    parser.add_argument("--keys", type=int, default=20_000, help="distinct keys")
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--batches", type=int, default=3, help="measured micro-batches")
    parser.add_argument("--value-bytes", type=int, default=2400)
    parser.add_argument("--text", action="store_true", help="values as base64 text")
    parser.add_argument("--burst", type=int, default=128, help="keys per burst (value-burst)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spark-state-api-"))
    # processing-time timers would make every batch ask for an empty one after it
    no_empty_batches = {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}
    spark = spark_session("spark-state-api", "local[2]", args.shuffle_partitions, no_empty_batches)
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    try:
        for mode in args.modes.split(","):
            results.append(measure(spark, mode, args, work))
            print(results[-1], file=sys.stderr, flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("| mode | events | keys | buckets | value | batch wall s | events/s | Python µs/key |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r.mode} | {r.events} | {r.keys} | {r.buckets} | {r.value} | {r.batch_wall_s} "
            f"| {r.events_per_s} | {r.python_us_per_key} |"
        )


if __name__ == "__main__":
    main()
