"""The SparkSession the engine runs in: RocksDB state store with changelog checkpointing, the
driver's interpreter for the Python workers, worker reuse, quiet logs.

Under `spark-submit` whatever it configured (master, the workers' Python, ...) is kept: the
defaults here only fill what is unset. `--spark-conf` always wins."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark import SparkConf
from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session(
    app_name: str, master: str, shuffle_partitions: int, conf: Mapping[str, str] | None = None
) -> SparkSession:
    # Local workers must run the driver's interpreter, with the project importable.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    defaults = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.pyspark.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    submitted = SparkConf()  # what spark-submit (or spark-defaults.conf) already set
    settings = {k: v for k, v in defaults.items() if not submitted.contains(k)}
    builder = SparkSession.builder
    for name, value in {**settings, **(conf or {})}.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
