"""The Spark copy: the project's Kafka source -> sink (hydrator/engines/spark), no state, no
parsing, in the Spark engine's session (hydrator/engines/spark/session.py) and micro-batches.
It is what the Spark engine would reach if hydrating cost nothing.

    python -m bench.spark_copy --bootstrap-servers HOST:PORT --input-topic IN --output-topic OUT \
        --checkpoint DIR [--master local[2]] [--max-offsets-per-trigger N]

Reads every partition from the start (AvailableNow: up to the ends it finds at the start) and
writes each record (key, value, headers) to the same partition of the output, stamped when it
is produced, then exits.
"""

from __future__ import annotations

import argparse

from hydrator.engines.spark.kafka_datasource import register
from hydrator.engines.spark.session import spark_session
from hydrator.kafka.admin import partition_counts


def copy(
    bootstrap: str,
    source: str,
    sink: str,
    checkpoint: str,
    master: str,
    max_offsets: int | None,
) -> int:
    from confluent_kafka.admin import AdminClient

    partitions = partition_counts(AdminClient({"bootstrap.servers": bootstrap}), [source])[source]
    # the engine's session, with the shuffle partitions it would pick (unused: no shuffle here)
    spark = spark_session("bench-spark-copy", master, (partitions or 1) * 2)
    fmt = register(spark)
    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topics", source)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    query = (
        reader.load()
        .select("key", "value", "headers", "partition")  # no timestamp: stamped at produce
        .writeStream.format(fmt)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-offsets-per-trigger", type=int)
    args = parser.parse_args()
    rows = copy(
        args.bootstrap_servers,
        args.input_topic,
        args.output_topic,
        args.checkpoint,
        args.master,
        args.max_offsets_per_trigger,
    )
    print(f"copied {rows} records")


if __name__ == "__main__":
    main()
