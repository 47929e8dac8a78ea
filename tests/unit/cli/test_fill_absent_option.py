"""`--fill-absent` like every option: command line, HYDRATOR_FILL_ABSENT, the config file; and a
usage error (exit 2, naming the flag) with any format but debezium."""

from __future__ import annotations

from pathlib import Path

import pytest

from hydrator.config import RunConfig
from tests.unit.cli.run_cli import BASE, invoke


def test_off_by_default(captured: list[RunConfig]) -> None:
    assert invoke(BASE).exit_code == 0
    assert captured[0].format_options.fill_absent is False


def test_from_the_command_line(captured: list[RunConfig]) -> None:
    result = invoke([*BASE, "--format", "debezium", "--fill-absent"])
    assert result.exit_code == 0, result.output
    assert captured[0].format_options.fill_absent is True


def test_from_the_environment(captured: list[RunConfig]) -> None:
    env = {"HYDRATOR_FORMAT": "debezium", "HYDRATOR_FILL_ABSENT": "true"}
    assert invoke(BASE, env=env).exit_code == 0
    assert captured[0].format_options.fill_absent is True


def test_from_the_config_file(captured: list[RunConfig], tmp_path: Path) -> None:
    file = tmp_path / "hydrator.toml"
    file.write_text('[run]\nformat = "debezium"\nfill-absent = true\n')
    result = invoke([*BASE, "--config", str(file)])
    assert result.exit_code == 0, result.output
    assert captured[0].format_options.fill_absent is True


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--fill-absent"], None),  # --format auto, the default
        (["--format", "auto", "--fill-absent"], None),
        ([], {"HYDRATOR_FILL_ABSENT": "1"}),
    ],
)
def test_any_other_format_is_a_usage_error_naming_the_flag(
    captured: list[RunConfig], args: list[str], env: dict[str, str] | None
) -> None:
    result = invoke([*BASE, *args], env=env)
    assert result.exit_code == 2
    assert "'--fill-absent'" in result.output and "only with --format debezium" in result.output
    assert captured == []
