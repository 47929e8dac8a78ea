"""`hydrator run` driven in-process, for the CLI's unit tests: the smallest valid command line
and an invoker that lets exceptions through, and `captured`, the fixture that stops before any
engine runs (this folder's conftest offers it; a test module elsewhere imports it)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from hydrator import cli
from hydrator.cli import launch
from hydrator.config import EmbeddedSettings, RunConfig

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


def invoke(args: list[str], env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli.cli, args, env=env, catch_exceptions=False)


# The HYDRATOR_* variables the run tests' options read: a developer's own must not leak in.
_RUN_VARIABLES = (
    "ENGINE",
    "BOOTSTRAP_SERVERS",
    "INPUT_TOPIC",
    "OUTPUT_TOPIC",
    "OUTPUT_SUFFIX",
    "CONFIG",
    "HANDOFF_TIMEOUT",
    "APPLICATION_ID",
    "FORMAT",
    "FILL_ABSENT",
    "KAFKA_PROPERTY",
)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """Stop before any engine runs; keep the config it would have been given."""
    configs: list[RunConfig] = []

    def fake_run(config: RunConfig, embedded: EmbeddedSettings) -> int:
        configs.append(config)
        return 0

    monkeypatch.setattr(launch, "run_embedded", fake_run)
    for name in _RUN_VARIABLES:
        monkeypatch.delenv(f"HYDRATOR_{name}", raising=False)
    return configs
