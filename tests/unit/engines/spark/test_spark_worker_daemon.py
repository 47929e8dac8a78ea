"""The engine's PySpark worker daemon (hydrator/spark_app/worker_daemon.py): PySpark's, silent
about a worker whose socket the JVM closed, and light to import (it forks its workers)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hydrator.spark_app import worker_daemon


def _printed(error: BaseException, capsys: pytest.CaptureFixture[str]) -> str:
    try:
        raise error
    except BaseException:
        worker_daemon._QuietAboutClosedSockets().print_exc()
    return capsys.readouterr().err


def test_a_broken_pipe_to_the_jvm_prints_nothing_and_any_other_error_its_trace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _printed(BrokenPipeError(32, "Broken pipe"), capsys) == ""
    assert _printed(ConnectionResetError(104, "Connection reset by peer"), capsys) == ""
    trace = _printed(ValueError("a real fault"), capsys)
    assert trace.startswith("Traceback") and "ValueError: a real fault" in trace
    assert worker_daemon._QuietAboutClosedSockets().format_exc  # the rest is the module's


def _threads_and_modules_after_importing(module: str) -> str:
    """In a fresh interpreter: the thread count and which thread-starting modules are loaded."""
    watched = ("pandas", "pyarrow", "confluent_kafka")
    probe = f"import sys, threading, {module}; "
    probe += f"print(threading.active_count(), sorted(set({watched!r}) & set(sys.modules)))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout


def test_the_daemon_loads_no_module_that_starts_threads_before_it_forks() -> None:
    assert _threads_and_modules_after_importing("hydrator.spark_app.worker_daemon") == "1 []\n"


def test_the_drivers_accumulator_server_says_nothing_of_a_jvm_gone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pyspark import accumulators

    from hydrator.engines.spark.session import _quiet_about_a_jvm_gone

    _quiet_about_a_jvm_gone()
    _quiet_about_a_jvm_gone()  # once is enough, twice changes nothing
    server = accumulators.AccumulatorTCPServer.__new__(accumulators.AccumulatorTCPServer)
    try:
        raise EOFError  # the stop took the JVM's end of the socket away
    except EOFError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
    try:
        raise ValueError("a wrong token")
    except ValueError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert "ValueError: a wrong token" in capsys.readouterr().err
