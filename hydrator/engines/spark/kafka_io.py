"""Which Kafka I/O the Spark engine reads and writes through (`--spark-kafka-io`), and the
checkpoint's record of the one that wrote it.

* `connector`: Spark's own Kafka connector (spark-sql-kafka-0-10, `format("kafka")`), what every
  Spark cluster offers; its jars must be on the session's classpath (`--spark-conf spark.jars=…`
  or `spark.jars.packages=…`).
* `python`: the project's own Kafka source and sink (kafka_datasource.py), on confluent-kafka,
  which needs no jar.
* `auto` (the default): the connector when its classes load in the session's JVM, else python.

The two keep offsets in the checkpoint in the same JSON, but not in the same source's metadata:
a checkpoint written through one is never read through the other (the offsets of one would be
re-read or skipped by the other). A small file in the checkpoint names the I/O that wrote it; a
checkpoint without one, but with a query in it, was written by the python I/O, the only one
before.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from hydrator.engines.spark.clock import SmallFiles
from hydrator.errors import ConfigurationError

AUTO = "auto"
CONNECTOR = "connector"
PYTHON = "python"
CHOICES = (AUTO, CONNECTOR, PYTHON)

CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
# The file the checkpoint names its Kafka I/O in, and the one Spark writes when a query first
# starts there (the query's id).
MARKER = "hydrator-kafka-io"
_QUERY_METADATA = "metadata"

DESCRIPTIONS = {
    CONNECTOR: "Spark's Kafka connector (spark-sql-kafka-0-10)",
    PYTHON: "the hydrator's Python Kafka source and sink (confluent-kafka)",
}


def connector_loads(spark: SparkSession) -> bool:
    """Whether Spark's Kafka connector is on the session's classpath: its source provider loads
    through the context class loader (where `spark.jars` and `--packages` put their jars)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        jvm.java.lang.Class.forName(CONNECTOR_CLASS, False, loader)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException, NoClassDefFoundError
        return False
    return True


def chosen_io(spark: SparkSession, requested: str) -> str:
    """The Kafka I/O the run uses: `requested`, or under `auto` the connector when it loads."""
    if requested == PYTHON:
        return PYTHON
    if connector_loads(spark):
        return CONNECTOR
    if requested == CONNECTOR:
        raise ConfigurationError(missing_connector(spark.version))
    return PYTHON


def missing_connector(spark_version: str) -> str:
    return (
        f"--spark-kafka-io connector: Spark's Kafka connector ({CONNECTOR_CLASS}) is not on "
        "the classpath of this Spark session. Add its jars with --spark-conf "
        "spark.jars=<the connector's jars, comma-separated> or have Spark fetch them with "
        "--spark-conf spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:"
        f"{spark_version}; or run on the Python Kafka I/O (--spark-kafka-io python)"
    )


def check_checkpoint(files: SmallFiles, kafka_io: str) -> None:
    """Refuse a checkpoint another Kafka I/O wrote (exit 2 naming both); mark a new one, or one
    from before the mark, with the I/O that writes it."""
    marked = files.read(MARKER)
    if marked is not None:
        written_by = marked.decode("utf-8", "replace").strip()
    elif files.read(_QUERY_METADATA) is not None:
        written_by = PYTHON  # a query ran there before checkpoints were marked
    else:
        written_by = kafka_io
    if written_by != kafka_io:
        raise ConfigurationError(
            f"--spark-kafka-io {kafka_io}: the checkpoint was written through the {written_by} "
            f"Kafka I/O ({DESCRIPTIONS.get(written_by, written_by)}); the {kafka_io} I/O "
            "cannot take over its offsets. Run with --spark-kafka-io "
            f"{written_by}, or start a new application id or --state-dir"
        )
    if marked is None:
        files.write(MARKER, f"{kafka_io}\n".encode())
