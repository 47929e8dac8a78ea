"""Run `hydrator run` as a real process, as an operator would, and watch its log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hydrator.topology.layout import internal_topic
from tests.harness.topics import create_topic

ASSIGNED = re.compile(r"assigned partitions \[([\d, ]*)\]")
PROGRESS_RECORDS = re.compile(r"records (\d+), commits")
WORKER_STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")
ASSIGNED_BY = re.compile(r"(?:\[worker (\d+)\]: )?assigned partitions \[([\d, ]*)\]")


def run_args(
    bootstrap_servers: str,
    application_id: str,
    inputs: list[str],
    state_dir: Path,
    *extra: str,
    output_topic: str | None = None,
    output_suffix: str | None = None,
) -> list[str]:
    args = [
        "run",
        "--engine",
        "embedded",
        "--bootstrap-servers",
        bootstrap_servers,
        "--application-id",
        application_id,
        "--state-dir",
        str(state_dir),
        "--progress-interval",
        "2s",
    ]
    for topic in inputs:
        args += ["--input-topic", topic]
    if output_topic is not None:
        args += ["--output-topic", output_topic]
    if output_suffix is not None:
        args += ["--output-suffix", output_suffix]
    return [*args, *extra]


@dataclass(frozen=True)
class App:
    """A test's application on the shared broker: its id (also its consumer group and the
    prefix of its internal topics), its state directory and its input topic. The `app` fixture
    (tests/conftest.py) makes one per test."""

    bootstrap: str
    name: str
    state_dir: Path
    source: str

    @property
    def dlq(self) -> str:
        return internal_topic(self.name, "dlq")

    def create_source(self, partitions: int) -> str:
        create_topic(self.bootstrap, self.source, partitions)
        return self.source

    def run_args(
        self, *extra: str, output_topic: str | None = None, output_suffix: str | None = None
    ) -> list[str]:
        """`hydrator run` (embedded) of this application on its input topic."""
        return run_args(
            self.bootstrap,
            self.name,
            [self.source],
            self.state_dir,
            *extra,
            output_topic=output_topic,
            output_suffix=output_suffix,
        )


def cli_command(args: list[str]) -> list[str]:
    """`hydrator ARGS`, as the console script runs it."""
    return [sys.executable, "-m", "hydrator.cli", *args]


def run_to_completion(
    args: list[str], timeout_s: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command that ends by itself (`--available-now`, `tail`, the state tools...), with
    `env` on top of this process's environment."""
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        cli_command(args), capture_output=True, text=True, timeout=timeout_s, env=environ
    )


class HydratorProcess:
    """A long-running `hydrator run`; its stderr goes to a log file the test can search."""

    def __init__(
        self, args: list[str], log_path: Path, start: bool = True, own_group: bool = False
    ) -> None:
        """`own_group`: the process leads a process group of its own, as a command started
        from a shell does (its children, the JVM among them, join it): `interrupt(group=True)`
        then plays a Ctrl-C at the terminal."""
        self.args = args
        self.log_path = log_path
        self.own_group = own_group
        self.process: subprocess.Popen[str] | None = None
        log_path.touch()
        if start:
            self.start()

    def start(self) -> None:
        self._log = open(self.log_path, "a")  # noqa: SIM115 - closed in wait()
        self.process = subprocess.Popen(
            cli_command(self.args),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=self.own_group,
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, pattern: str | re.Pattern[str], timeout_s: float = 60) -> re.Match[str]:
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = regex.search(self.log)
            if match:
                return match
            if self.process.poll() is not None:
                raise AssertionError(f"hydrator exited {self.process.returncode}:\n{self.log}")
            time.sleep(0.1)
        raise AssertionError(f"no {regex.pattern!r} in the log within {timeout_s}s:\n{self.log}")

    def assigned(self) -> list[int] | None:
        """The partitions of the latest assignment, None before the first."""
        matches = ASSIGNED.findall(self.log)
        if not matches:
            return None
        return [int(p) for p in matches[-1].replace(" ", "").split(",") if p]

    def held(self) -> set[int]:
        """The partitions the run holds: the union of each worker's latest assignment (the
        process's own with --workers 1)."""
        latest = {worker: numbers for worker, numbers in ASSIGNED_BY.findall(self.log)}
        return {int(p) for numbers in latest.values() for p in numbers.split(",") if p.strip()}

    def wait_until_held(self, partitions: set[int], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.held() != partitions:
            if self.process.poll() is not None:
                raise AssertionError(f"hydrator exited {self.process.returncode}:\n{self.log}")
            assert time.monotonic() < deadline, f"never held {partitions}:\n{self.log}"
            time.sleep(0.1)

    def worker_pids(self) -> dict[int, int]:
        """The process id of each worker of a run with --workers, as last started."""
        return {int(index): int(pid) for index, pid in WORKER_STARTED.findall(self.log)}

    def records_processed(self) -> int:
        matches = PROGRESS_RECORDS.findall(self.log)
        return int(matches[-1]) if matches else 0

    def terminate(self, timeout_s: float = 60) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout_s)

    def interrupt(self, group: bool = False, timeout_s: float = 60) -> int:
        """SIGINT to the process (`kill -INT <pid>`), or to its whole process group as a
        Ctrl-C would be (`group`, for a process started with `own_group`)."""
        if group:
            assert self.own_group, "a group of its own, else the signal reaches the tests too"
            os.killpg(self.process.pid, signal.SIGINT)
        else:
            self.process.send_signal(signal.SIGINT)
        return self.wait(timeout_s)

    def kill(self) -> int:
        self.process.kill()
        return self.wait(10)

    def wait(self, timeout_s: float = 60) -> int:
        try:
            return self.process.wait(timeout_s)
        finally:
            self._log.close()

    def __enter__(self) -> HydratorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            if self.own_group:
                os.killpg(self.process.pid, signal.SIGKILL)  # its JVM and workers too
            else:
                self.process.kill()
            self.process.wait(10)
        self._log.close()
