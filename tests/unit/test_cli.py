"""`hydrator run` option handling: sources, precedence and exit code 2 naming the bad option."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hydrator import cli
from hydrator.config import RunConfig

BASE = [
    "run",
    "--engine",
    "embedded",
    "--bootstrap-servers",
    "h:1",
    "--input-topic",
    "t",
    "--output-suffix",
    ".e",
]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """Stop before any engine runs; keep the config it would have been given."""
    configs: list[RunConfig] = []

    def fake_run(config: RunConfig) -> int:
        configs.append(config)
        return 0

    monkeypatch.setattr(cli, "_run_embedded", fake_run)
    for name in (
        "ENGINE",
        "BOOTSTRAP_SERVERS",
        "INPUT_TOPIC",
        "OUTPUT_TOPIC",
        "OUTPUT_SUFFIX",
        "CONFIG",
        "HANDOFF_TIMEOUT",
        "APPLICATION_ID",
    ):
        monkeypatch.delenv(f"HYDRATOR_{name}", raising=False)
    return configs


def invoke(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(cli.cli, args, env=env, catch_exceptions=False)


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
    assert config.kafka_properties == {"socket.timeout.ms": "5000"}


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


def test_spark_is_not_available_yet(captured: list[RunConfig]) -> None:
    result = invoke(["run", "--engine", "spark", *BASE[3:]])
    assert result.exit_code == 2
    assert "not yet available" in result.output


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
    assert config.bootstrap_servers == "env:1"
    assert config.application_id == "from-cli"
    assert config.hydration.handoff_timeout_ms == 5000
    assert config.available_now is True


def test_unknown_key_in_config_file(captured: list[RunConfig], tmp_path: Path) -> None:
    file = tmp_path / "hydrator.toml"
    file.write_text('bootstrap-servers = "h:1"\nhandof-timeout = "5s"\n')
    result = invoke([*BASE, "--config", str(file)])
    assert result.exit_code == 2
    assert "handof_timeout" in result.output


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
