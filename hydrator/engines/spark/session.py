"""The SparkSession the engine runs in: RocksDB state store with changelog checkpointing, the
driver's interpreter for the Python workers, worker reuse, quiet logs."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session(
    app_name: str, master: str, shuffle_partitions: int, conf: Mapping[str, str] | None = None
) -> SparkSession:
    # Workers must run the driver's interpreter (DESIGN §7), with the project importable.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    defaults = {
        "spark.pyspark.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    builder = SparkSession.builder.master(master).appName(app_name)
    for name, value in {**defaults, **(conf or {})}.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
