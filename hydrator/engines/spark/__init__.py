"""Spark engine: PySpark Structured Streaming with per-key state.

Kafka I/O: the project's own Python streaming data source and sink (`hydrator-kafka`, on
confluent-kafka), because Spark's Kafka connector jar cannot be assumed on the classpath.
"""

from hydrator.engines.spark.kafka_datasource import FORMAT, KafkaDataSource, register
from hydrator.engines.spark.kafka_source import SOURCE_SCHEMA

__all__ = ["FORMAT", "SOURCE_SCHEMA", "KafkaDataSource", "register"]
