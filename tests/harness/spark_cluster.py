"""A Spark standalone cluster on loopback, from the installed pyspark distribution: one master and
its workers (`spark-class ...deploy.master.Master` / `...deploy.worker.Worker`), and drivers
submitted to it, each in a process group of its own, logs in the test's directory.

Every process of the cluster and of its drivers carries SPARK_CONF_DIR=<the cluster's own conf
dir> in its environment, and so does everything they start (executors, PySpark's daemons, which
make process groups of their own): `leftovers()` finds them all by it, and leaving the cluster
ends them all.

The workers get this process's environment (PYTHONPATH included), so their executors' Python
workers import the same `hydrator` the test runs, as a cluster whose nodes all have the package.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spark_env(conf_dir: Path) -> dict[str, str]:
    """The environment for every process of the cluster and for a driver: loopback only, the
    installed distribution, and an empty conf dir (no spark-defaults.conf from elsewhere)."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "PYTHONUNBUFFERED": "1",
    }


@dataclass
class SparkCluster:
    master_url: str
    env: dict[str, str]
    log_dir: Path
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    drivers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers have running now."""
        groups = {worker.pid for worker in self.workers}
        found = []
        for pid, pgid, command in _processes():
            if pgid in groups and EXECUTOR_CLASS in command:
                found.append(pid)
        return sorted(found)

    def wait_for_executors(self, count: int, timeout_s: float = 120) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.executor_pids()
            if len(pids) >= count:
                return pids
            time.sleep(0.2)
        raise AssertionError(f"fewer than {count} executors after {timeout_s}s: {self.logs()}")

    def launched_executors(self) -> int:
        """Executors the workers were asked to launch so far (replacements included)."""
        pattern = re.compile(r"Asked to launch executor")
        return sum(len(pattern.findall(log.read_text())) for log in self._worker_logs())

    def leftovers(self) -> list[int]:
        """Every live process the cluster or one of its drivers started."""
        marker = f"SPARK_CONF_DIR={self.env['SPARK_CONF_DIR']}".encode()
        found = []
        for pid, _, _ in _processes():
            try:
                environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker in environment and pid != os.getpid():
                found.append(pid)
        return found

    def logs(self) -> str:
        parts = []
        for log in [self.log_dir / "master.log", *self._worker_logs()]:
            parts.append(f"--- {log.name}\n{log.read_text()[-3000:]}")
        return "\n".join(parts)

    def _worker_logs(self) -> list[Path]:
        return sorted(self.log_dir.glob("worker-*.log"))


@contextlib.contextmanager
def spark_cluster(
    log_dir: Path, workers: int = 2, cores: int = 1, memory: str = "2g"
) -> Iterator[SparkCluster]:
    log_dir.mkdir(parents=True, exist_ok=True)
    conf_dir = log_dir / "conf"
    conf_dir.mkdir(exist_ok=True)
    env = spark_env(conf_dir)
    # No REST submission server (a fixed port, 6066, that two runs would fight over).
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
    port = free_port()
    started: list[subprocess.Popen[bytes]] = []
    cluster: SparkCluster | None = None
    try:
        master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())]
        master = _start(
            ["org.apache.spark.deploy.master.Master", *master_args], log_dir / "master.log", env
        )
        started.append(master)
        _wait_for_line(master, log_dir / "master.log", "I have been elected leader")
        url = f"spark://127.0.0.1:{port}"
        cluster = SparkCluster(url, env, log_dir, master)
        for n in range(workers):
            work_dir = log_dir / f"worker-{n}"
            worker_args = [
                *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
                *("--work-dir", str(work_dir), "--webui-port", str(free_port()), url),
            ]
            worker = _start(
                ["org.apache.spark.deploy.worker.Worker", *worker_args],
                log_dir / f"worker-{n}.log",
                env,
            )
            started.append(worker)
            cluster.workers.append(worker)
        for n, worker in enumerate(cluster.workers):
            _wait_for_line(
                worker, log_dir / f"worker-{n}.log", "Successfully registered with master"
            )
        yield cluster
    finally:
        # drivers first: a driver left running asks the master for executors again and again
        for process in [*(cluster.drivers if cluster else []), *reversed(started)]:
            stop_group(process)
        if cluster is not None:
            _end_leftovers(cluster)


def _end_leftovers(cluster: SparkCluster, grace_s: float = 15) -> None:
    """Processes that outlive their group (PySpark daemons notice their JVM is gone when their
    pipe closes) get `grace_s`, then SIGKILL."""
    deadline = time.monotonic() + grace_s
    while cluster.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in cluster.leftovers():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Driver:
    """A driver process (spark-submit or `hydrator run`) in its own process group."""

    def __init__(self, command: list[str], cluster: SparkCluster, log_path: Path) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=cluster.env,
                start_new_session=True,
            )
        cluster.drivers.append(self.process)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the driver and the JVM or Python process it started, at once."""
        kill_group(self.process)

    def terminate(self, timeout_s: float = 120) -> int:
        """SIGTERM to the driver process alone (its own JVM must outlive the clean stop)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stop_group takes its children too
        )


def _wait_for_line(
    process: subprocess.Popen[bytes], log: Path, text: str, timeout_s: float = 120
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise AssertionError(f"{log.name}: exited {process.returncode}:\n{log.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in {log.name} within {timeout_s}s:\n{log.read_text()}")


def stop_group(
    process: subprocess.Popen[bytes] | subprocess.Popen[str], grace_s: float = 10
) -> None:
    """SIGTERM the process group `process` leads, SIGKILL what is left after `grace_s`."""
    group = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(group):
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    process.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _group_alive(group):
        time.sleep(0.1)


def kill_group(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGKILL a whole process group at once, as a crashed machine would end it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _group_alive(process.pid):
        time.sleep(0.1)


def group_members(group: int) -> list[int]:
    return [pid for pid, pgid, _ in _processes() if pgid == group]


def _group_alive(group: int) -> bool:
    return bool(group_members(group))


def _processes() -> Iterator[tuple[int, int, str]]:
    """(pid, process group, command line) of every live process (zombies left out)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        # stat: pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        yield int(entry.name), int(fields[2]), command
