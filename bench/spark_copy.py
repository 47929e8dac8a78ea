"""The Spark copy: Kafka source -> sink, no state, no parsing, in the Spark engine's session
(hydrator/engines/spark/session.py) and micro-batches. It is what the Spark engine would reach if
hydrating cost nothing, on either of its Kafka I/Os: the project's Python source and sink
(`--kafka-io python`) or Spark's Kafka connector (`--kafka-io connector`, its jars given with
`--jars`). `--pass-through` adds what Spark charges any stateful Python job: the records grouped
by Kafka key through `applyInPandasWithState`, whose function passes each group's records on
unchanged (no state kept), the bar the engine's own per-group work is measured against.

    python -m bench.spark_copy --bootstrap-servers HOST:PORT --input-topic IN --output-topic OUT \
        --checkpoint DIR [--master local[2]] [--max-offsets-per-trigger N] \
        [--kafka-io python|connector] [--jars a.jar,b.jar] [--pass-through]

Reads every partition from the start (AvailableNow: up to the ends it finds at the start) and
writes each record (key, value, headers) to the same partition of the output, stamped when it
is produced, then exits.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from hydrator.engines.spark.kafka_datasource import register
from hydrator.engines.spark.session import spark_session
from hydrator.kafka.admin import partition_counts

_COLUMNS = ("key", "value", "headers", "partition")  # no timestamp: stamped at produce
_PASS_THROUGH_SCHEMA = (
    "key binary, value binary, headers array<struct<key: string, value: binary>>, partition int"
)


def copy(
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    master: str,
    max_offsets: int | None,
    kafka_io: str = "python",
    jars: str | None = None,
    pass_through: bool = False,
) -> int:
    from confluent_kafka.admin import AdminClient

    partitions = partition_counts(AdminClient({"bootstrap.servers": bootstrap}), [source])[source]
    # the engine's session, with the shuffle partitions it picks (used by --pass-through only)
    conf = {"spark.jars": jars} if jars else {}
    spark = spark_session("bench-spark-copy", master, partitions or 1, conf)
    fmt = register(spark) if kafka_io == "python" else "kafka"
    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe" if kafka_io == "connector" else "topics", source)
        .option("startingOffsets", "earliest")
    )
    if kafka_io == "connector":
        reader = reader.option("includeHeaders", "true")
        reader = reader.option("kafka.isolation.level", "read_committed")
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    records = reader.load().select(*_COLUMNS)
    if pass_through:
        records = _passed_through(spark, records)
    query = (
        records.writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    spark.stop()
    return rows


def _passed_through(spark: SparkSession, records: DataFrame) -> DataFrame:
    """Grouped by Kafka key through applyInPandasWithState, each group's rows returned as they
    came (one group per key: what the engine's grouping costs Spark, with no work of its own)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    def each_group(_key: Any, frames: Iterator[Any], _state: Any) -> Iterator[Any]:
        yield from frames

    return records.groupBy("key").applyInPandasWithState(
        each_group, _PASS_THROUGH_SCHEMA, "unused int", "Append", GroupStateTimeout.NoTimeout
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--kafka-io", choices=("python", "connector"), default="python")
    parser.add_argument("--jars", help="Spark's Kafka connector's jars, comma-separated")
    parser.add_argument("--pass-through", action="store_true")
    args = parser.parse_args()
    rows = copy(
        args.bootstrap_servers,
        args.input_topic,
        args.output_topic,
        args.checkpoint,
        args.master,
        args.max_offsets_per_trigger,
        args.kafka_io,
        args.jars,
        args.pass_through,
    )
    print(f"copied {rows} records")


if __name__ == "__main__":
    main()
