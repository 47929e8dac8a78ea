"""Run `hydrator run` as a real process, as an operator would, and watch its log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from hydrator.errors import EXIT_TEMPORARY
from hydrator.topology.layout import internal_topic
from tests.harness.spark_kafka import with_connector, with_test_jvm
from tests.harness.topics import create_topic, end_offsets

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
    """`hydrator ARGS`, as the console script runs it; a Spark run on Spark's Kafka connector
    when the tests have its jars, its driver JVM tuned for a short run (spark_kafka.py)."""
    return [sys.executable, "-m", "hydrator.cli", *with_test_jvm(with_connector(list(args)))]


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

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_for_log(
        self, pattern: str | re.Pattern[str], timeout_s: float = 60, since: int = 0
    ) -> re.Match[str]:
        """The first match of `pattern` in the log (from character `since` on, as `len(log)`
        told earlier), waited for."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = regex.search(self.log, since)
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


def wait_until_committed(
    bootstrap: str,
    group: str,
    topic: str,
    processes: HydratorProcess | list[HydratorProcess],
    timeout_s: float,
) -> None:
    """Until the group's committed offsets reach the ends of `topic` and the last progress line
    of each process holds nothing parked: a record parked for a key's handoff has its offset
    committed, but its output waits for the handoff, which is read back only once the batch
    that wrote it has committed (with long batch intervals, seconds after the offsets)."""
    running = processes if isinstance(processes, list) else [processes]
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for process in running:
                assert process.running(), process.log
            committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=10)
            at_ends = all(tp.offset >= ends[tp.partition] for tp in committed)
            unparked = all(_last_progress(p.log).startswith("parked 0,") for p in running)
            if at_ends and unparked:
                return
            time.sleep(1)
    finally:
        consumer.close()
    logs = "\n".join(p.log[-5000:] for p in running)
    raise AssertionError(f"{topic} not committed and unparked in {timeout_s}s:\n{logs}")


def _last_progress(log: str) -> str:
    """The last progress line from its parked count on ('' when there is none yet)."""
    found = re.findall(r"hydrator\.progress: .*?(parked \d+,.*)", log)
    return found[-1] if found else ""


class ServiceProcess(HydratorProcess):
    """A long-running `hydrator run` kept up as a service manager (systemd's
    `RestartForceExitStatus=75`, a Kubernetes pod) keeps it: started again whenever it exits
    with 75, the code that asks for exactly that. `restarts` counts them."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.restarts = 0
        self._stopping = False
        super().__init__(args, log_path)
        self._watch = threading.Thread(target=self._keep_up, daemon=True)
        self._watch.start()

    def _keep_up(self) -> None:
        while not self._stopping:
            process = self.process
            if process is not None and process.poll() == EXIT_TEMPORARY and not self._stopping:
                self._log.close()
                self.restarts += 1
                self.start()
            time.sleep(0.2)

    def running(self) -> bool:
        """Between an exit with 75 and the start that follows it too."""
        code = self.process.poll() if self.process is not None else None
        return code is None or (code == EXIT_TEMPORARY and not self._stopping)

    def terminate(self, timeout_s: float = 60) -> int:
        self._stopping = True
        self._watch.join()
        return super().terminate(timeout_s)

    def __exit__(self, *exc: object) -> None:
        self._stopping = True
        super().__exit__(*exc)
