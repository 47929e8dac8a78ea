"""A single-node Apache Kafka (KRaft: broker and controller in one process) run from a binary
distribution on loopback: `hydrator dev broker --kafka-home DIR` and the test suite use it.

A distribution is a directory in the layout of Apache Kafka's binary release (`bin/`, `config/`,
`libs/`), as `KAFKA_HOME` usually names. Its log directory is a fresh temporary one unless one is
given; a stopped broker starts again on the same ports and log directory (tests kill and restart
it). The broker dies with the process that started it.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from hydrator.errors import ConfigurationError, TemporaryFailure
from hydrator.kafka.local_broker import die_with_parent, free_port

HEAP_OPTS = "-Xmx512m -Xms512m"  # ~350 MB resident: a broker beside tests and a dev loop
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0

# Settings for a one-node broker that starts and answers at once. Everything else is the
# distribution's own config/server.properties.
SINGLE_NODE_SETTINGS = {
    "process.roles": "broker,controller",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    # a consumer group's first join is not held back 3 s for more members
    "group.initial.rebalance.delay.ms": "0",
    # one node: the internal topics cannot be replicated; fewer partitions start faster
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # a transaction past its producer's transaction.timeout.ms is aborted within a second
    # (Kafka's default looks every 10 s)
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


class NotAKafkaDistribution(ConfigurationError):
    """The directory given as a Kafka distribution is not one (exit 2)."""


class KafkaDidNotStart(TemporaryFailure):
    """The broker process ended or did not answer in time; the message quotes its log."""


def check_distribution(home: Path, named_by: str) -> Path:
    """`home` resolved, when it holds Apache Kafka's start and storage scripts and its server jar;
    else NotAKafkaDistribution naming it and `named_by` (the option or variable that gave it)."""
    home = Path(home).expanduser()
    missing = [
        name
        for name in ("bin/kafka-server-start.sh", "bin/kafka-storage.sh")
        if not (home / name).is_file()
    ]
    if not list((home / "libs").glob("kafka-server-*.jar")) and not list(
        (home / "libs").glob("kafka_*.jar")
    ):
        missing.append("libs/kafka-server-*.jar")
    if missing:
        raise NotAKafkaDistribution(
            f"{named_by}: {home} is not an Apache Kafka distribution (no {', '.join(missing)}); "
            "give the directory of an unpacked Kafka binary release (bin/, config/, libs/)"
        )
    return home.resolve()


def cluster_id() -> str:
    """A new KRaft cluster id, as `kafka-storage.sh random-uuid` prints it (without a JVM): never
    one that starts with "-", which the tool's argument parser would take for an option."""
    while True:
        made = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not made.startswith("-"):
            return made


@dataclass
class ApacheKafka:
    """A running Apache Kafka from `home`; a context manager, or start() and stop()."""

    home: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    # The port clients are told to connect to; another one puts a proxy in their way (tests).
    advertised_port: int | None = None
    # where the broker keeps its data and its own logs; None: a temporary directory, removed on
    # close()
    work_dir: Path | None = None
    settings: dict[str, str] = field(default_factory=dict)  # on top of SINGLE_NODE_SETTINGS
    # where the broker's console output (its whole log) goes; None: logs/console.log in work_dir
    console_log: Path | None = None
    # One node of a cluster (tests): its id, the cluster's id and its controller quorum
    # (`controller.quorum.voters`, every node a voter). None: a cluster of this node alone.
    node_id: int = 1
    cluster: str | None = None
    voters: str | None = None
    _process: subprocess.Popen[bytes] | None = None
    _temporary: bool = False
    _internal_port: int = field(default_factory=free_port)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def exit_code(self) -> int | None:
        """The broker's exit code once it has exited by itself; None while it runs."""
        return self._process.poll() if self._process is not None else None

    @property
    def server_log(self) -> Path:
        return self._dir / "logs" / "server.log"

    @property
    def data_dir(self) -> Path:
        return self._dir / "data"

    @property
    def version(self) -> str:
        """The distribution's Kafka version, as its server jar names it ("4.3.0")."""
        for jar in sorted((self.home / "libs").glob("kafka_*-*.jar")):
            version = jar.stem.rsplit("-", 1)[1]
            if version[:1].isdigit():
                return version
        return "(version unknown)"

    @property
    def _dir(self) -> Path:
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="hydrator-kafka-"))
            self._temporary = True
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return self.work_dir

    def start(self, timeout_s: float = START_TIMEOUT_S, wait: bool = True) -> ApacheKafka:
        """Start the broker (formatting its log directory the first time) and wait until it
        answers (`wait`: a cluster's node answers only once a quorum of its nodes runs).
        Started already: nothing to do."""
        if self._process is not None and self._process.poll() is None:
            return self
        properties = self._write_properties()
        if not (self.data_dir / "meta.properties").exists():
            self._run_storage_format(properties)
        (self._dir / "logs").mkdir(exist_ok=True)
        env = {
            **os.environ,
            "KAFKA_HEAP_OPTS": os.environ.get("KAFKA_HEAP_OPTS", HEAP_OPTS),
            "LOG_DIR": str(self._dir / "logs"),
        }
        console = open(self.console_log or self._dir / "logs" / "console.log", "ab")  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                [str(self.home / "bin" / "kafka-server-start.sh"), str(properties)],
                stdout=console,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a terminal's Ctrl-C reaches the one who started it
                preexec_fn=die_with_parent,
            )
        finally:
            console.close()
        if wait:
            self.wait_ready(timeout_s)
        return self

    def _write_properties(self) -> Path:
        controller = f"CONTROLLER://127.0.0.1:{self.controller_port}"
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},{controller}"
        advertised = f"PLAINTEXT://127.0.0.1:{self.advertised_port or self.port},{controller}"
        between = {}
        if self.advertised_port is not None:
            # the broker's requests to itself must not pass through the proxy clients use
            internal = f"INTERNAL://127.0.0.1:{self._internal_port}"
            listeners += f",{internal}"
            advertised += f",{internal}"
            between = {
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                "INTERNAL:PLAINTEXT",
            }
        ours = {
            **SINGLE_NODE_SETTINGS,
            **between,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "node.id": str(self.node_id),
            **(
                {"controller.quorum.voters": self.voters}
                if self.voters
                else {"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"}
            ),
            "log.dirs": str(self.data_dir),
            **self.settings,
        }
        # a quorum is named by its voters or found through bootstrap servers, never both
        skipped = ours.keys() | ({"controller.quorum.bootstrap.servers"} if self.voters else set())
        base = self.home / "config" / "server.properties"
        lines = []
        if base.is_file():
            for line in base.read_text().splitlines():
                name = line.split("=", 1)[0].strip()
                if not line.lstrip().startswith("#") and "=" in line and name in skipped:
                    continue
                lines.append(line)
        lines += ["", "# hydrator: a single-node broker on loopback"]
        lines += [f"{name}={value}" for name, value in ours.items()]
        path = self._dir / "server.properties"
        path.write_text("\n".join(lines) + "\n")
        return path

    def _run_storage_format(self, properties: Path) -> None:
        result = subprocess.run(
            [
                str(self.home / "bin" / "kafka-storage.sh"),
                "format",
                # a single node is its own quorum; a cluster's nodes name theirs (voters)
                *([] if self.voters else ["--standalone"]),
                "--cluster-id",
                self.cluster or cluster_id(),
                "--config",
                str(properties),
            ],
            capture_output=True,
            env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m", "LOG_DIR": str(self._dir / "logs")},
            timeout=120,
        )
        if result.returncode != 0:
            said = (result.stdout + result.stderr).decode(errors="replace").strip()
            raise KafkaDidNotStart(
                f"kafka-storage.sh format failed (exit {result.returncode}): {said[-2000:]}"
            )

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._listening():
            self._check_running()
            if time.monotonic() > deadline:
                self._give_up(timeout_s)
            time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while True:
            self._check_running()
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                self._give_up(timeout_s)
            time.sleep(0.2)

    def _give_up(self, timeout_s: float) -> None:
        tail = self._log_tail()
        self.stop()
        raise KafkaDidNotStart(
            f"Apache Kafka from {self.home} did not answer on {self.bootstrap_servers} within "
            f"{timeout_s:.0f} s; its log ends:\n{tail}"
        )

    def _check_running(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            code = self._process.returncode
            self._process = None
            raise KafkaDidNotStart(
                f"Apache Kafka from {self.home} exited with code {code}; its log ends:\n"
                f"{self._log_tail()}"
            )

    def _log_tail(self, lines: int = 20) -> str:
        for path in (self.server_log, self.console_log or self._dir / "logs" / "console.log"):
            if path.exists() and path.stat().st_size:
                return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the broker cleanly (SIGTERM: it closes its logs in a few seconds); its log
        directory stays for start() again."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the broker: what a machine losing the process looks like. start() brings it
        back on the same ports and data."""
        self._end(signal.SIGKILL)

    def pause(self) -> None:
        if self._process is not None:
            os.killpg(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._process is not None:
            os.killpg(self._process.pid, signal.SIGCONT)

    def _end(self, sig: signal.Signals) -> None:
        if self._process is None:
            return
        process, self._process = self._process, None
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGCONT)  # a paused broker hears nothing else
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        # a SIGKILLed broker's port can stay taken for a moment by its sockets
        deadline = time.monotonic() + 10
        while self._listening() and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        """Stop the broker and remove a temporary log directory."""
        self.stop()
        if self._temporary and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
