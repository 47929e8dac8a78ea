"""The Structured Streaming query: Kafka in, route, applyInPandasWithState, Kafka out.

inputs + handoff topic --route (mapInArrow)--> groupBy(group) --applyInPandasWithState-->
    packed records --Kafka sink--> outputs / handoff / DLQ topics

Kafka in and out go through Spark's Kafka connector or the project's Python source and sink
(kafka_io.py): on the connector a `mapInArrow` pass (sink_rows.py) turns the packed records into
the sink's columns, sized; the Python sink reads the packed records itself.

With --reselect, a mapInArrow after applyInPandasWithState completes the records the group
function deferred, one query per source table and partition (reselect.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.streaming.state import GroupStateTimeout

from hydrator.engines.spark import connector
from hydrator.engines.spark.kafka_datasource import register
from hydrator.engines.spark.kafka_io import CONNECTOR, PYTHON
from hydrator.engines.spark.reselect import ReselectSpec, completion
from hydrator.engines.spark.routing import routed
from hydrator.engines.spark.sink_rows import record_limits, sink_rows
from hydrator.engines.spark.stateful import (
    COUNTERS,
    NEXT_TIMEOUT,
    OUTPUT_SCHEMA,
    PENDING_OUTPUT_SCHEMA,
    STATE_SCHEMA,
    HydratorSpec,
    group_function,
)
from hydrator.topology.layout import Topology

# The counters are summed per micro-batch into the query's observed metrics under this name, with
# the earliest timeout armed (stateful.NEXT_TIMEOUT).
OBSERVATION = "hydrator"


@dataclass(frozen=True)
class QuerySpec:
    bootstrap_servers: str
    inputs: tuple[str, ...]
    topology: Topology
    checkpoint: str
    hydrator: HydratorSpec
    kafka_properties: Mapping[str, str] | None = None
    max_offsets_per_trigger: int | None = None
    # max.message.bytes per topic written; records that exceed it go to the DLQ
    max_message_bytes: Mapping[str, int] | None = None
    producer_max_bytes: int | None = None  # the sink producer's message.max.bytes
    # wall time minus processing time: the downtime the timeouts must not count (clock.py)
    clock_offset_ms: int = 0
    # (gate file, engine run): timeouts wait until the query has caught up (clock.py)
    catch_up_gate: tuple[str, str] | None = None
    # --reselect (None: off); its max_qps is per partition (reselect.partition_settings)
    reselect: ReselectSpec | None = None
    # kafka_io.CONNECTOR or kafka_io.PYTHON; `kafka_properties` then hold the -X properties
    # with the connector's raw options (`connector.*`) among them, or without
    kafka_io: str = PYTHON


def _read_topics(spec: QuerySpec) -> list[str]:
    return [*spec.inputs, *_internal_inputs(spec.topology)]


def connector_source_options(spec: QuerySpec) -> dict[str, str]:
    return connector.source_options(
        spec.bootstrap_servers,
        _read_topics(spec),
        spec.kafka_properties or {},
        spec.max_offsets_per_trigger,
    )


def connector_sink_options(spec: QuerySpec) -> dict[str, str]:
    return connector.sink_options(
        spec.bootstrap_servers,
        spec.checkpoint,
        spec.kafka_properties or {},
        spec.producer_max_bytes,
    )


def kafka_input(spark: SparkSession, spec: QuerySpec) -> DataFrame:
    """Input and handoff topics (SOURCE_SCHEMA rows) through the run's Kafka I/O."""
    if spec.kafka_io == CONNECTOR:
        return connector.read_kafka(spark, connector_source_options(spec))
    reader = (
        spark.readStream.format(register(spark))
        .option("kafka.bootstrap.servers", spec.bootstrap_servers)
        .option("topics", ",".join(_read_topics(spec)))
        .option("startingOffsets", "earliest")
    )
    for name, value in (spec.kafka_properties or {}).items():
        reader = reader.option(f"kafka.{name}", value)
    if spec.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(spec.max_offsets_per_trigger))
    return reader.load()


def _internal_inputs(topology: Topology) -> list[str]:
    """The internal topics the query reads beside the inputs: handoffs, and the bootstrap topic
    as state-only input (hydrator/bootstrap/spark.py)."""
    return [topology.handoff_topic, topology.bootstrap_topic]


def hydrate(records: DataFrame, spec: QuerySpec) -> DataFrame:
    """SOURCE_SCHEMA rows in, OUTPUT_SCHEMA rows (packed records to write, counters) out; any
    streaming input. The counters are summed per micro-batch into the observed metrics."""
    reselect = spec.reselect is not None
    hydrated = (
        routed(records, spec.hydrator, spec.topology.handoff_topic, spec.topology.bootstrap_topic)
        .groupBy("group")
        .applyInPandasWithState(
            group_function(
                spec.hydrator, spec.topology, spec.clock_offset_ms, spec.catch_up_gate, reselect
            ),
            PENDING_OUTPUT_SCHEMA if reselect else OUTPUT_SCHEMA,
            STATE_SCHEMA,
            "Append",
            GroupStateTimeout.ProcessingTimeTimeout,
        )
    )
    if spec.reselect is not None:
        hydrated = hydrated.mapInArrow(completion(spec.reselect), OUTPUT_SCHEMA)
    sums = [
        F.coalesce(F.sum(F.col("counts")[i]), F.lit(0)).alias(n) for i, n in enumerate(COUNTERS)
    ]
    next_timeout = F.min(F.get(F.col("counts"), len(COUNTERS))).alias(NEXT_TIMEOUT)
    return hydrated.observe(OBSERVATION, *sums, next_timeout)


def writer(spark: SparkSession, spec: QuerySpec) -> DataStreamWriter:
    records = hydrate(kafka_input(spark, spec), spec).where(F.col("records").isNotNull())
    if spec.kafka_io == CONNECTOR:
        return _connector_writer(records, spec)
    sink = (
        records.select("records")
        .writeStream.format(register(spark))
        .option("kafka.bootstrap.servers", spec.bootstrap_servers)
        .option("checkpointLocation", spec.checkpoint)
        .outputMode("append")
    )
    if spec.producer_max_bytes is not None:
        sink = sink.option("kafka.message.max.bytes", str(spec.producer_max_bytes))
    for name, value in (spec.kafka_properties or {}).items():
        sink = sink.option(f"kafka.{name}", value)  # -X may lower message.max.bytes
    limits = ",".join(f"{t}={n}" for t, n in (spec.max_message_bytes or {}).items())
    return sink.option("dlqTopic", spec.topology.dlq_topic).option("maxMessageBytes", limits)


def _connector_writer(records: DataFrame, spec: QuerySpec) -> DataStreamWriter:
    """Spark's Kafka sink over the records' own columns, each record sized first."""
    producer = connector.producer_limit(
        spec.kafka_properties or {}, spec.producer_max_bytes or _PRODUCER_DEFAULT_MAX_BYTES
    )
    limits = record_limits(spec.topology.dlq_topic, spec.max_message_bytes, producer)
    sink = sink_rows(records, limits).writeStream.format(connector.FORMAT).outputMode("append")
    for name, value in connector_sink_options(spec).items():
        sink = sink.option(name, value)
    return sink


# The Java producer's default max.request.size, the limit when the engine sets none.
_PRODUCER_DEFAULT_MAX_BYTES = 1_048_576
