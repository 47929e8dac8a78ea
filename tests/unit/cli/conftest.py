from __future__ import annotations

import pytest

from hydrator.cli import launch
from hydrator.config import EmbeddedSettings, RunConfig

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
