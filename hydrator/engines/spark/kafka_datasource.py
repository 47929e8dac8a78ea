"""The `hydrator-kafka` Python data source: Kafka source and sink for Structured Streaming."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, DataSourceStreamWriter
from pyspark.sql.types import StructType

from hydrator.engines.spark.kafka_sink import KafkaStreamWriter
from hydrator.engines.spark.kafka_source import SOURCE_SCHEMA, KafkaStreamReader

FORMAT = "hydrator-kafka"


class KafkaDataSource(DataSource):
    """`spark.readStream.format("hydrator-kafka")` / `df.writeStream.format("hydrator-kafka")`;
    options are described in kafka_source and kafka_sink."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaStreamWriter(self.options, schema)


def register(spark: SparkSession) -> str:
    """Register the data source with the session; returns the format name to use."""
    spark.dataSource.register(KafkaDataSource)
    return FORMAT
