"""The Spark engine's --state-dir as a path or a URI: the checkpoint directory reached through
Spark's own (Hadoop) filesystems, the processing clock's files kept there, and a URI whose
filesystem Spark lacks refused before anything is created."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hydrator.config import StateDirUnusable
from hydrator.engines.spark import clock
from hydrator.engines.spark.checkpoint_dir import CheckpointDirectory, checkpoint_location
from hydrator.engines.spark.clock import CLOCK_FILES, ClockReading, DowntimeLedger
from hydrator.engines.spark.session import spark_session
from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce
from tests.integration.runs.test_start_up_checks import topic_names
from tests.integration.spark.test_spark_engine import spark_args

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("state-dir-test", "local[1]", 1)
    yield session
    session.stop()


@pytest.fixture(params=["path", "file-uri"])
def state_dir(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """--state-dir as an operator gives it: a plain path, or a file: URI."""
    return tmp_path / "state" if request.param == "path" else f"file://{tmp_path}/state"


def test_files_go_to_the_checkpoint_directory_under_the_state_dir(
    spark: SparkSession, state_dir: str | Path, tmp_path: Path
) -> None:
    directory = CheckpointDirectory(spark, checkpoint_location(state_dir, "app"))
    directory.check_writable()
    assert directory.read("absent") is None
    directory.write("f", b"first")
    directory.write("f", b"second, longer")
    assert directory.read("f") == b"second, longer"
    assert (tmp_path / "state" / "app" / "checkpoint" / "f").read_bytes() == b"second, longer"


def test_the_ledger_keeps_its_readings_in_the_checkpoint_directory(
    spark: SparkSession, state_dir: str | Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = CheckpointDirectory(spark, checkpoint_location(state_dir, "app"))
    monkeypatch.setattr(clock, "wall_ms", lambda: T0)
    first = DowntimeLedger(directory)
    assert first.start() == 0
    first.stop()
    monkeypatch.setattr(clock, "wall_ms", lambda: T0 + 60_000)
    second = DowntimeLedger(directory)
    assert second.start() == 60_000
    second.stop()
    # a restart right away adds nothing more
    assert DowntimeLedger(directory).start() == 60_000
    written = tmp_path / "state" / "app" / "checkpoint"
    readings = [json.loads((written / name).read_text()) for name in CLOCK_FILES]
    assert {r["offset_ms"] for r in readings} == {60_000}


def test_a_torn_reading_falls_back_to_the_other_file(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver killed while it wrote one file (truncated first) leaves the previous reading in
    the other; the run after it counts the downtime since that one."""
    directory = CheckpointDirectory(spark, checkpoint_location(tmp_path, "app"))
    directory.write(CLOCK_FILES[0], ClockReading(5_000, T0, number=4).to_json())
    directory.write(CLOCK_FILES[1], b'{"offset_ms": 5000, "ali')
    monkeypatch.setattr(clock, "wall_ms", lambda: T0 + 10_000)
    assert DowntimeLedger(directory).start() == 15_000


def test_the_reading_of_an_earlier_version_is_taken_over(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = CheckpointDirectory(spark, checkpoint_location(tmp_path, "app"))
    directory.write("hydrator-clock.json", json.dumps({"offset_ms": 7, "alive_ms": T0}).encode())
    monkeypatch.setattr(clock, "wall_ms", lambda: T0 + 1_000)
    ledger = DowntimeLedger(directory)
    assert ledger.start() == 1_007
    ledger.stop()


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("s3a://bucket/state", "hadoop-aws"),  # Hadoop's S3 connector is not in pyspark's jars
        ("nosuchfs://somewhere/state", "nosuchfs"),
    ],
)
def test_a_uri_without_a_filesystem_names_the_state_dir_and_what_is_missing(
    spark: SparkSession, uri: str, reason: str
) -> None:
    with pytest.raises(StateDirUnusable) as refused:
        CheckpointDirectory(spark, checkpoint_location(uri, "app"))
    message = str(refused.value)
    assert message.startswith("--state-dir") and uri in message and reason in message


def test_an_unwritable_location_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    directory = CheckpointDirectory(spark, checkpoint_location(f"file://{blocker}/state", "app"))
    with pytest.raises(StateDirUnusable, match="--state-dir: cannot create or write"):
        directory.check_writable()


def test_a_state_dir_uri_spark_cannot_use_is_exit_2_before_any_topic_is_created(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, 1)
    produce(bootstrap, source, [ToastTable().insert(1)])
    args = spark_args(bootstrap, unique_name, [source], tmp_path, "--available-now")
    args[args.index("--state-dir") + 1] = "s3a://bucket/hydrator"
    done = run_to_completion(args, timeout_s=180)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "--state-dir" in done.stderr and "hadoop-aws" in done.stderr
    assert "Traceback" not in done.stderr
    created = {f"{source}.hydrated", f"{unique_name}-handoff", f"{unique_name}-dlq"}
    assert not created & topic_names(bootstrap)
