"""The SparkSession the engine runs in: RocksDB state store with changelog checkpointing, the
driver's interpreter for the Python workers, worker reuse, quiet logs.

Under `spark-submit` whatever it configured (master, the workers' Python, ...) is kept: the
defaults here (`--master` among them) only fill what is unset. `--spark-conf` always wins.

Started by `hydrator run` instead, the process has no JVM yet: the session's settings go to the
JVM PySpark launches, which is why nothing may start one before (`spark.driver.memory` and the
like only take effect at launch)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from hydrator.spark_app import SCRIPT

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
    submitted = _submitted_settings()
    settings = {k: v for k, v in defaults.items() if k not in submitted}
    builder = SparkSession.builder
    for name, value in {**settings, **(conf or {})}.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _submitted_settings() -> set[str]:
    """The settings spark-submit made (its options, its properties file, spark-defaults.conf),
    when it started this process: its JVM is then up already, and PySpark finds it by
    PYSPARK_GATEWAY_PORT. Otherwise none."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return set()
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, launches none
    submitted = dict(SparkConf().getAll())
    if submitted.get("spark.app.name") == SCRIPT.name:
        # spark-submit's default, the script's file name: the application id says more
        del submitted["spark.app.name"]
    return set(submitted)
