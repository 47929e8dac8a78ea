"""`--spark-kafka-io`: the Spark engine on the Python Kafka I/O whatever the tests' jars, a
checkpoint it wrote refused by Spark's Kafka connector (exit 2 naming both), SASL properties
reaching the connector's options masked, and `connector` without the connector on the classpath
(exit 2 saying how to add it). Three Spark starts, one of them a short run."""

from __future__ import annotations

import pyspark
import pytest

from hydrator.core.records import HEADER_SOURCE
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import App, run_to_completion
from tests.harness.spark_kafka import JARS_VARIABLE, connector_jars
from tests.harness.topics import produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

pytestmark = pytest.mark.integration

SECRET = "s3cret-not-to-be-shown"
SASL = ["sasl.mechanism=PLAIN", "sasl.username=alice", f"sasl.password={SECRET}"]


def _args(app: App, *extra: str) -> list[str]:
    return spark_args(app.bootstrap, app.name, [app.source], app.state_dir, *extra)


def test_a_python_io_checkpoint_is_refused_by_the_connector_with_sasl_options_masked(
    app: App,
) -> None:
    jars = connector_jars()
    if not jars:
        pytest.skip(f"needs Spark's Kafka connector jars ({JARS_VARIABLE})")
    app.create_source(2)
    table = ToastTable(doc_size=200)
    records = list(table.workload(keys=10, updates_per_key=2))
    produce(app.bootstrap, app.source, records)

    python = run_to_completion(
        _args(app, "--available-now", "--spark-kafka-io", "python"), timeout_s=SPARK_TIMEOUT_S
    )
    assert python.returncode == 0, python.stderr[-5000:]
    assert "Kafka I/O: the hydrator's Python Kafka source and sink" in python.stderr
    outputs = read_topic(app.bootstrap, f"{app.source}.hydrated")
    assert len(outputs) == len(records)
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], out.header(HEADER_SOURCE)

    sasl = [arg for prop in SASL for arg in ("-X", prop)]
    refused = run_to_completion(
        _args(
            app,
            "--available-now",
            "--spark-kafka-io",
            "connector",
            "--spark-conf",
            "spark.jars=" + ",".join(jars),
            *sasl,
        ),
        timeout_s=SPARK_TIMEOUT_S,
    )
    assert refused.returncode == 2, refused.stderr[-5000:]
    assert "--spark-kafka-io connector: the checkpoint was written through the python" in (
        refused.stderr
    )
    # what reaches the connector's clients: librdkafka's SASL settings as the Java client's
    assert "kafka.sasl.jaas.config=***" in refused.stderr
    assert "kafka.sasl.mechanism=***" in refused.stderr
    assert SECRET not in refused.stderr + refused.stdout + python.stderr + python.stdout


def test_connector_without_its_jars_says_how_to_add_them(app: App) -> None:
    app.create_source(1)
    done = run_to_completion(_args(app, "--available-now", "--spark-kafka-io", "connector"))
    assert done.returncode == 2, done.stderr[-5000:]
    assert "Spark's Kafka connector" in done.stderr
    assert "--spark-conf spark.jars=" in done.stderr
    package = (
        f"spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    )
    assert package in done.stderr
