"""Errors by kind: every error of the project derives from HydratorError, and the kind alone
chooses the exit code `hydrator run` ends with."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import hydrator
import state
from hydrator import cli
from hydrator.config import ConfigError
from hydrator.core.settings import UnresolvedColumnsError
from hydrator.engines.embedded import watchdog
from hydrator.engines.embedded.engine import EmbeddedEngine
from hydrator.engines.embedded.state_dir import StateDirLocked
from hydrator.errors import (
    EXIT_STOPPED,
    EXIT_TEMPORARY,
    ConfigurationError,
    HydratorError,
    RecordError,
    StorageError,
    TemporaryFailure,
    exit_code_for,
)
from hydrator.events import InvalidKey
from hydrator.kafka.reachability import BrokerUnavailable
from hydrator.ops.state_tools import StoreUnreadable
from state.stores.rocksdb import StoreCorrupted


def _project_exceptions() -> list[type[Exception]]:
    found = []
    for package in (hydrator, state):
        prefix = package.__name__ + "."
        for module_info in pkgutil.walk_packages(package.__path__, prefix):
            if module_info.name.endswith("__main__"):
                continue
            module = importlib.import_module(module_info.name)
            for _, value in inspect.getmembers(module, inspect.isclass):
                if issubclass(value, Exception) and value.__module__ == module.__name__:
                    found.append(value)
    return found


def test_every_error_of_the_project_is_a_kind_of_hydrator_error() -> None:
    """(An exit carried as SystemExit, as --max-dlq-ratio's 65 is, is no error.)"""
    errors = _project_exceptions()
    assert len(errors) >= 23
    assert [e.__qualname__ for e in errors if not issubclass(e, HydratorError)] == []


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("bad"), 2),
        (StateDirLocked("held"), 2),
        (BrokerUnavailable("no broker"), 75),
        (StoreCorrupted("checksum mismatch"), 75),
        (UnresolvedColumnsError("unresolved"), 1),
        (StoreUnreadable("cannot open"), 1),
        (InvalidKey("not a key"), 1),
        (KeyboardInterrupt(), 130),
        (RuntimeError("a bug"), 1),
    ],
)
def test_the_kind_chooses_the_exit_code(error: BaseException, code: int) -> None:
    assert exit_code_for(error) == code


def test_the_watchdog_exits_with_the_codes_of_the_kinds() -> None:
    assert watchdog.EXIT_STOPPED == EXIT_STOPPED == 130
    assert watchdog.EXIT_TEMPORARY == EXIT_TEMPORARY == 75


def test_errors_keep_their_builtin_bases() -> None:
    """`except ValueError` around a parser still catches what it caught before."""
    assert issubclass(ConfigError, ValueError) and issubclass(InvalidKey, ValueError)
    assert issubclass(InvalidKey, RecordError)
    assert issubclass(BrokerUnavailable, RuntimeError | TemporaryFailure)


RUN = [
    "run",
    "--bootstrap-servers",
    "127.0.0.1:1",
    "--input-topic",
    "t",
    "--output-suffix",
    ".e",
    "--workers",
    "1",
]


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (StorageError("IO error: disk gone"), 75, "Error: IO error: disk gone"),
        (ConfigurationError("--input-topic t: gone"), 2, "Error: --input-topic t: gone"),
        (TemporaryFailure("no broker answered"), 75, "Error: no broker answered"),
        (KeyboardInterrupt(), 130, None),
    ],
)
def test_run_ends_with_the_code_of_the_kind_that_stopped_the_engine(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    error: BaseException,
    code: int,
    line: str | None,
) -> None:
    def fail(self: EmbeddedEngine) -> None:
        raise error

    monkeypatch.setattr(EmbeddedEngine, "run", fail)
    for name in ("CONFIG", "ENGINE", "STATE_DIR", "OUTPUT_TOPIC", "WORKERS"):
        monkeypatch.delenv(f"HYDRATOR_{name}", raising=False)
    result = CliRunner().invoke(cli.cli, [*RUN, "--state-dir", str(tmp_path)])
    assert result.exit_code == code, result.output
    if line is not None:
        assert line in result.output
