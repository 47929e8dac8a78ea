"""The SparkSession the engine runs in: RocksDB state store with changelog checkpointing, the
driver's interpreter for the Python workers, worker reuse, the worker daemon, quiet logs.

Under `spark-submit` whatever it configured (master, the workers' Python, ...) is kept: the
defaults here (`--master` among them) only fill what is unset. `--spark-conf` always wins.

Started by `hydrator run` instead, the process has no JVM yet: the session's settings go to the
JVM PySpark launches, which is why nothing may start one before (`spark.driver.memory` and the
like only take effect at launch)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark import SparkConf, SparkContext, accumulators
from pyspark.sql import SparkSession

from hydrator.spark_app import SCRIPT

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
WORKER_DAEMON = "hydrator.spark_app.worker_daemon"


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
        # PySpark's daemon, quiet about a worker whose abandoned task's socket the JVM closed
        "spark.python.daemon.module": WORKER_DAEMON,
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    submitted = _submitted_settings()
    settings = {k: v for k, v in defaults.items() if k not in submitted}
    settings |= loopback_defaults(master if "spark.master" not in submitted else "", conf or {})
    _quiet_about_a_jvm_gone()
    builder = SparkSession.builder
    for name, value in {**settings, **(conf or {})}.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


# What the driver's accumulator server reads when the JVM's end of its socket is gone.
_JVM_GONE = (EOFError, BrokenPipeError, ConnectionResetError)


def _quiet_about_a_jvm_gone() -> None:
    """The driver serves the JVM's accumulator updates on a socket. When a stop takes the JVM
    down before that server, its handler reads end-of-file, and socketserver prints the
    traceback on stderr: no fault, the query is over (the workers' like case:
    hydrator/spark_app/worker_daemon.py). That one error is not printed; any other is."""
    servers = (
        accumulators.AccumulatorTCPServer,
        getattr(accumulators, "AccumulatorUnixServer", None),
    )
    for server in servers:
        if server is None or getattr(server, "_quiet_about_a_jvm_gone", False):
            continue
        printed = server.handle_error

        def handle_error(
            self: Any, request: Any, client_address: Any, _printed: Any = printed
        ) -> None:
            if not isinstance(sys.exc_info()[1], _JVM_GONE):
                _printed(self, request, client_address)

        server.handle_error = handle_error  # type: ignore[method-assign]
        server._quiet_about_a_jvm_gone = True  # type: ignore[union-attr]


LOOPBACK = "127.0.0.1"
_DRIVER_ADDRESS = ("spark.driver.host", "spark.driver.bindAddress")


def loopback_defaults(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """A local master (`local`, `local[*]`, `local[N,F]`) runs everything in this process:
    its driver listens on loopback, not on the first non-loopback address Spark would pick
    (reachable from the network, and a warning at every start). Unless the user chose an
    address: SPARK_LOCAL_IP or either driver setting. (Taking effect at the JVM's launch,
    SPARK_LOCAL_IP is set here too: the JVM reads it before any setting.)"""
    if not master.startswith("local") or "SPARK_LOCAL_IP" in os.environ:
        return {}
    if any(name in conf for name in _DRIVER_ADDRESS):
        return {}
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    return dict.fromkeys(_DRIVER_ADDRESS, LOOPBACK)


# Spark's log lines that say nothing to act on at the default level (`--log-level debug` keeps
# them): an idle stream's no-data batches "falling behind" the trigger, the listener bus's
# stack traces when a listener's process is going away, start-up remarks about AQE and the
# data source's registration. A query's failure is still told: the engine logs it.
_STREAMING = "org.apache.spark.sql.execution.streaming.runtime"
QUIET_LOGGERS = {
    f"{_STREAMING}.ProcessingTimeExecutor": "ERROR",
    f"{_STREAMING}.StreamingQueryListenerBus": "OFF",
    f"{_STREAMING}.ResolveWriteToStream": "ERROR",
    f"{_STREAMING}.MicroBatchExecution": "ERROR",
    "org.apache.spark.sql.execution.datasources.DataSourceManager": "ERROR",
}
# What stopping a query mid-batch makes Spark (and Hadoop, under it) say: the batch's tasks
# killed, its write aborted (it is redone from the checkpoint at the next start), its state
# store commit interrupted, job groups already gone. Once a stop is under way nothing else is
# going on to report; the hydrator's own lines say what was committed.
STOPPING_LOGGERS = dict.fromkeys(("org.apache.spark", "org.apache.hadoop", *QUIET_LOGGERS), "OFF")


def quiet_logs(spark: SparkSession, levels: Mapping[str, str]) -> None:
    """Set the level of each of Spark's (log4j's) loggers named; the caller leaves them be at
    the hydrator's debug level."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    for name, level in levels.items():
        log4j.core.config.Configurator.setLevel(name, log4j.Level.toLevel(level))


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
