"""`hydrator run` option handling: sources, precedence and exit code 2 naming the bad option."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hydrator.cli import launch
from hydrator.config import RunConfig, SparkSettings
from tests.unit.cli.run_cli import BASE, invoke


def test_options_reach_the_config(captured: list[RunConfig]) -> None:
    result = invoke(
        [
            *BASE,
            "--input-topic",
            "u",
            "--handoff-timeout",
            "2m",
            "--on-stale",
            "forward",
            "--no-fill-before",
            "-X",
            "socket.timeout.ms=5000",
            "--state-ttl",
            "7d",
        ]
    )
    assert result.exit_code == 0, result.output
    (config,) = captured
    assert config.input_topics == ("t", "u")
    assert config.hydration.handoff_timeout_ms == 120_000
    assert config.hydration.state_ttl_ms == 7 * 86_400_000
    assert config.hydration.on_stale == "forward"
    assert config.hydration.fill_before is False
    assert config.kafka.properties == {"socket.timeout.ms": "5000"}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--on-stale", "sometimes"], "--on-stale"),
        (["--handoff-timeout", "soon"], "--handoff-timeout"),
        (["--output-topic", "o"], "--output-topic"),
        (["-X", "no-equals-sign"], "--kafka-property"),
        (["-X", "isolation.level=read_uncommitted"], "--kafka-property"),
        (["--format", "xml"], "--format"),
        (["--placeholder", "hex:zz"], "--placeholder"),
        (["--max-record-bytes", "lots"], "--max-record-bytes"),
    ],
)
def test_bad_option_exits_2_naming_it(
    captured: list[RunConfig], extra: list[str], named: str
) -> None:
    result = invoke([*BASE, *extra])
    assert result.exit_code == 2
    assert named in result.output
    assert captured == []


def test_missing_required_option(captured: list[RunConfig]) -> None:
    result = invoke(["run", "--engine", "embedded", "--input-topic", "t", "--output-topic", "o"])
    assert result.exit_code == 2
    assert "--bootstrap-servers" in result.output


@pytest.fixture
def captured_spark(
    monkeypatch: pytest.MonkeyPatch, captured: list[RunConfig]
) -> list[tuple[RunConfig, SparkSettings]]:
    """Stop before the Spark engine starts; keep what it would have been given."""
    runs: list[tuple[RunConfig, SparkSettings]] = []

    def fake_run(config: RunConfig, spark: SparkSettings) -> int:
        runs.append((config, spark))
        return 0

    monkeypatch.setattr(launch, "run_spark", fake_run)
    for name in ("MASTER", "SPARK_CONF", "SPARK_KAFKA_IO", "MAX_OFFSETS_PER_TRIGGER"):
        monkeypatch.delenv(f"HYDRATOR_{name}", raising=False)
    return runs


SPARK = ["run", "--engine", "spark", *BASE[3:]]


def test_spark_defaults(captured_spark: list[tuple[RunConfig, SparkSettings]]) -> None:
    result = invoke(SPARK)
    assert result.exit_code == 0, result.output
    ((_, spark),) = captured_spark
    assert (spark.master, spark.conf, spark.max_offsets_per_trigger) == ("local[*]", {}, None)


def test_spark_options_reach_the_engine(
    captured_spark: list[tuple[RunConfig, SparkSettings]],
) -> None:
    result = invoke(
        [
            *SPARK,
            "--master",
            "spark://head:7077",
            "--spark-conf",
            "spark.sql.shuffle.partitions=8",
            "--spark-conf",
            "spark.driver.extraJavaOptions=-Da=b -Dc=d",
            "--max-offsets-per-trigger",
            "50000",
        ]
    )
    assert result.exit_code == 0, result.output
    ((_, spark),) = captured_spark
    assert spark.master == "spark://head:7077"
    assert spark.conf == {
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": "-Da=b -Dc=d",
    }
    assert spark.max_offsets_per_trigger == 50_000


def test_spark_options_from_env_and_config_file(
    captured_spark: list[tuple[RunConfig, SparkSettings]], tmp_path: Path
) -> None:
    file = tmp_path / "hydrator.toml"
    file.write_text('master = "local[2]"\nspark-conf = ["spark.a=1"]\n')
    env = {"HYDRATOR_MAX_OFFSETS_PER_TRIGGER": "10"}
    result = invoke([*SPARK, "--config", str(file)], env=env)
    assert result.exit_code == 0, result.output
    ((_, spark),) = captured_spark
    assert (spark.master, spark.conf, spark.max_offsets_per_trigger) == (
        "local[2]",
        {"spark.a": "1"},
        10,
    )


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--spark-conf", "spark.sql.shuffle.partitions"], "--spark-conf"),
        (["--spark-conf", "=8"], "--spark-conf"),
        (["--max-offsets-per-trigger", "0"], "--max-offsets-per-trigger"),
        (["--max-offsets-per-trigger", "many"], "--max-offsets-per-trigger"),
    ],
)
def test_bad_spark_option_exits_2_naming_it(
    captured_spark: list[tuple[RunConfig, SparkSettings]], extra: list[str], named: str
) -> None:
    result = invoke([*SPARK, *extra])
    assert result.exit_code == 2
    assert named in result.output
    assert captured_spark == []


def test_the_embedded_path_does_not_import_pyspark() -> None:
    code = (
        "import sys\n"
        "import hydrator.cli, hydrator.engines.embedded.engine, hydrator.demo.runner\n"
        "assert 'pyspark' not in sys.modules, 'pyspark imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_config_file_env_and_command_line_precedence(
    captured: list[RunConfig], tmp_path: Path
) -> None:
    file = tmp_path / "hydrator.toml"
    file.write_text(
        '[run]\nengine = "embedded"\nbootstrap-servers = "file:1"\ninput-topic = ["a", "b"]\n'
        'output_suffix = ".x"\nhandoff-timeout = "5s"\napplication-id = "from-file"\n'
        "available-now = true\n"
    )
    env = {"HYDRATOR_BOOTSTRAP_SERVERS": "env:1", "HYDRATOR_APPLICATION_ID": "from-env"}
    result = invoke(["run", "--config", str(file), "--application-id", "from-cli"], env=env)
    assert result.exit_code == 0, result.output
    (config,) = captured
    assert config.input_topics == ("a", "b")
    assert config.kafka.bootstrap_servers == "env:1"
    assert config.application_id == "from-cli"
    assert config.hydration.handoff_timeout_ms == 5000
    assert config.available_now is True


def test_unknown_key_in_config_file_is_warned_and_left_out(
    captured: list[RunConfig], tmp_path: Path
) -> None:
    file = tmp_path / "hydrator.toml"
    file.write_text('bootstrap-servers = "h:1"\nhandof-timeout = "5s"\n')
    result = invoke([*BASE, "--config", str(file)])
    assert result.exit_code == 0, result.output
    assert "ignoring handof-timeout (did you mean handoff-timeout?)" in result.stderr
    (config,) = captured
    assert config.hydration.handoff_timeout_ms == 60_000  # the default: the key was left out


def test_env_var_lists_split_on_commas(captured: list[RunConfig]) -> None:
    env = {
        "HYDRATOR_INPUT_TOPIC": "a,b c",
        "HYDRATOR_ENGINE": "embedded",
        "HYDRATOR_BOOTSTRAP_SERVERS": "h:1",
        "HYDRATOR_OUTPUT_TOPIC": "o",
    }
    result = invoke(["run"], env=env)
    assert result.exit_code == 0, result.output
    assert captured[0].input_topics == ("a", "b", "c")


def test_parked_caps_default_and_read_from_options_and_env(captured: list[RunConfig]) -> None:
    assert invoke(BASE).exit_code == 0
    assert captured[-1].hydration.max_parked_records == 1000
    assert captured[-1].hydration.max_parked_bytes == 8 * 1024 * 1024
    result = invoke([*BASE, "--max-parked-records", "5"], env={"HYDRATOR_MAX_PARKED_BYTES": "64KB"})
    assert result.exit_code == 0, result.output
    assert captured[-1].hydration.max_parked_records == 5
    assert captured[-1].hydration.max_parked_bytes == 64 * 1024
    result = invoke([*BASE, "--max-parked-records", "0"])
    assert result.exit_code == 2 and "--max-parked-records" in result.output


@pytest.fixture
def warned(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[str, ...], str]]:
    """The options `run` warns it ignores, and under which engine."""
    calls: list[tuple[tuple[str, ...], str]] = []
    monkeypatch.setattr(launch, "warn_ignored", lambda names, engine: calls.append((names, engine)))
    return calls


def test_spark_kafka_io_and_the_trigger_reach_the_engine(
    captured_spark: list[tuple[RunConfig, SparkSettings]],
    warned: list[tuple[tuple[str, ...], str]],
) -> None:
    result = invoke([*SPARK, "--spark-kafka-io", "python", "--commit-interval", "2s"])
    assert result.exit_code == 0, result.output
    ((_, spark),) = captured_spark
    assert spark.kafka_io == "python"
    assert spark.trigger_interval_ms == 2_000
    assert warned == [((), "spark")]


def test_spark_keeps_its_own_trigger_unless_commit_interval_is_given(
    captured_spark: list[tuple[RunConfig, SparkSettings]],
) -> None:
    assert invoke(SPARK).exit_code == 0
    ((_, spark),) = captured_spark
    assert spark.kafka_io == "auto"
    assert spark.trigger_interval_ms == 500


def test_embedded_only_options_given_under_spark_are_named(
    captured_spark: list[tuple[RunConfig, SparkSettings]],
    warned: list[tuple[tuple[str, ...], str]],
) -> None:
    args = [*SPARK, "--workers", "2", "--backlog-commit-interval", "1s", "--startup-timeout", "1m"]
    result = invoke(args, env={"HYDRATOR_STATE_CACHE_BYTES": "1MB"})
    assert result.exit_code == 0, result.output
    assert len(captured_spark) == 1
    ignored = ("workers", "backlog_commit_interval", "state_cache_bytes", "startup_timeout")
    assert warned == [(ignored, "spark")]


def test_an_unknown_spark_kafka_io_is_a_usage_error(
    captured_spark: list[tuple[RunConfig, SparkSettings]],
) -> None:
    result = invoke([*SPARK, "--spark-kafka-io", "jvm"])
    assert result.exit_code == 2
    assert "--spark-kafka-io" in result.output
    assert captured_spark == []


def test_spark_only_options_given_under_embedded_are_named(
    captured: list[RunConfig],
    warned: list[tuple[tuple[str, ...], str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MASTER", "SPARK_CONF", "SPARK_KAFKA_IO", "MAX_OFFSETS_PER_TRIGGER"):
        monkeypatch.delenv(f"HYDRATOR_{name}", raising=False)
    result = invoke([*BASE, "--max-offsets-per-trigger", "10", "--spark-kafka-io", "python"])
    assert result.exit_code == 0, result.output
    assert warned == [(("spark_kafka_io", "max_offsets_per_trigger"), "embedded")]


def test_an_ignored_option_is_warned_about_by_its_flag(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="hydrator"):
        launch.warn_ignored(["backlog_commit_interval"], "spark")
    assert "--backlog-commit-interval is ignored under --engine spark: only the embedded" in (
        caplog.text
    )
