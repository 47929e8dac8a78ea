"""Spark engine: PySpark Structured Streaming with per-key state.

Kafka I/O (`--spark-kafka-io`, kafka_io.py): Spark's own Kafka connector (spark-sql-kafka-0-10,
connector.py) when its jars are on the classpath, else the project's own Python streaming data
source and sink (`hydrator-kafka`, on confluent-kafka).
"""

from hydrator.engines.spark.kafka_datasource import FORMAT, KafkaDataSource, register
from hydrator.engines.spark.kafka_source import SOURCE_SCHEMA

__all__ = ["FORMAT", "SOURCE_SCHEMA", "KafkaDataSource", "register"]
