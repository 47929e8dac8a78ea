"""`-X consumer.…`, `producer.…` and `admin.…` reach only their kind of client in the Spark engine,
as in the embedded engine: the Spark source's consumers and admin client, the sink's producer and
the engine's own clients each take theirs (librdkafka rejects a role-prefixed name as "No such
configuration property")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import cli_command
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

SPARK_TIMEOUT_S = 400
SECRET = "spark-role-s3cret two words"


def spark_run(
    bootstrap: str, app: str, source: str, output: str, state_dir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = [
        "run",
        "--engine",
        "spark",
        "--master",
        "local[2]",
        "--bootstrap-servers",
        bootstrap,
        "--application-id",
        app,
        "--state-dir",
        str(state_dir),
        "--input-topic",
        source,
        "--output-topic",
        output,
        "--available-now",
        *extra,
    ]
    # A secret given the recommended way: it must reach the clients and appear in no line.
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "HYDRATOR_KAFKA_PROPERTY": f"sasl.username=svc\nsasl.password={SECRET}",
    }
    return subprocess.run(
        cli_command(args),  # on Spark's Kafka connector when the tests have it
        capture_output=True,
        text=True,
        timeout=SPARK_TIMEOUT_S,
        env=env,
    )


def test_role_properties_reach_their_clients_only(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 2)
    table = ToastTable()
    events = list(table.workload(keys=6, updates_per_key=2))
    produce(bootstrap, source, events)
    done = spark_run(
        bootstrap,
        unique_name,
        source,
        output,
        tmp_path,
        # Each of these is a property of one kind of client only, so handing it to another
        # kind would at least warn; with its prefix left on, librdkafka refuses it outright.
        "-X",
        "consumer.fetch.wait.max.ms=20",
        "-X",
        "consumer.queued.min.messages=1000",
        "-X",
        "producer.linger.ms=2",
        "-X",
        "producer.compression.type=lz4",
        "-X",
        "admin.socket.timeout.ms=30000",
        "--log-format",
        "json",
    )
    assert done.returncode == 0, done.stderr[-5000:]
    # The hydrator's own lines are JSON objects (Spark's JVM keeps its log4j format).
    ours = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    (totals,) = [line for line in ours if line["message"].startswith("totals:")]
    assert totals["logger"] == "hydrator.spark" and totals["application_id"] == unique_name
    assert totals["counts"]["events"] == len(events)
    assert "No such configuration property" not in done.stderr
    for part in ("spark-role-s3cret", "two words"):
        assert part not in done.stdout + done.stderr
    hydrated = read_topic(bootstrap, output)
    assert len(hydrated) == len(events)
    for record in hydrated:
        lsn, after = after_of(record.value)
        assert after == table.expected_after[lsn]


def test_a_role_property_librdkafka_rejects_is_exit_2_naming_the_option(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    done = spark_run(
        bootstrap, unique_name, source, output, tmp_path, "-X", "producer.no.such.property=1"
    )
    assert done.returncode == 2, done.stderr[-5000:]
    assert "--kafka-property" in done.stderr
    assert "no.such.property" in done.stderr
    assert "Traceback" not in done.stderr
