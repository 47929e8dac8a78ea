"""Spark's Kafka connector for the tests: HYDRATOR_TEST_SPARK_KAFKA_JARS names a directory of its
jars (the connector and its runtime dependencies); every `hydrator run --engine spark` the harness
starts then gets them as `--spark-conf spark.jars=…`, and `--spark-kafka-io auto` reads and writes
through the connector. Without the variable Spark runs use the Python Kafka I/O. A run that names
its Kafka I/O (`--spark-kafka-io python`) or its own `spark.jars` is left as it is."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

JARS_VARIABLE = "HYDRATOR_TEST_SPARK_KAFKA_JARS"


def connector_jars() -> list[str]:
    """The connector's jars, absolute; none without the variable. A variable that names no
    directory of jars stops the test: it would otherwise run on the Python I/O unnoticed."""
    named = os.environ.get(JARS_VARIABLE)
    if not named:
        return []
    jars = sorted(str(path.absolute()) for path in Path(named).glob("*.jar"))
    if not jars:
        raise RuntimeError(f"{JARS_VARIABLE}={named}: no jars there")
    return jars


def on_connector() -> bool:
    return bool(connector_jars())


def with_connector(args: list[str]) -> list[str]:
    """`args` of a `hydrator run --engine spark` with the connector's jars, when the tests have
    them; any other command as it is."""
    if not _spark_run(args) or "--spark-kafka-io" in args or _sets_jars(args):
        return args
    jars = connector_jars()
    if not jars:
        return args
    return [*args, "--spark-conf", "spark.jars=" + ",".join(jars)]


# A test's Spark driver lives a minute or two: the JIT's first tier alone starts and runs it in
# less CPU than the full tiered JIT, and one GC thread spares the two cores the other test's.
TEST_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def with_test_jvm(args: list[str]) -> list[str]:
    """`args` of a `hydrator run --engine spark` with the driver JVM's options for short test
    runs, unless they set the driver's Java options themselves; any other command as it is."""
    if not _spark_run(args) or any("spark.driver.extraJavaOptions=" in arg for arg in args):
        return args
    return [*args, "--spark-conf", f"spark.driver.extraJavaOptions={TEST_DRIVER_JAVA_OPTIONS}"]


def _spark_run(args: list[str]) -> bool:
    if not args or args[0] != "run":
        return False
    pairs = itertools.pairwise(args)
    return "--engine=spark" in args or any(pair == ("--engine", "spark") for pair in pairs)


def _sets_jars(args: list[str]) -> bool:
    return any(arg.startswith(("spark.jars=", "spark.jars.packages=")) for arg in args)
