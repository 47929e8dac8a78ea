"""The local state directory of one application instance.

<state-dir>/<application-id>/
    .lock             held while an instance runs (with --workers, by its supervisor): two
                      instances must not share stores
    .worker-<i>.lock  held by worker i of a run with several workers
    process-id        stable identity, so a restarted instance re-uses its transactional id
    workers           how many transactional ids (one per worker) the last run may have used
    <changelog>-<p>/  the RocksDB store of task p (a local copy of changelog partition p), used by
                      whichever worker runs task p; RocksDB's own lock keeps it to one at a time
"""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from pathlib import Path

from hydrator.config import StateDirUnusable
from hydrator.errors import ConfigurationError

# How long a worker waits for its lock: a worker of a supervisor that was just killed may still
# be on its way out.
WORKER_LOCK_WAIT_S = 30.0
_LOCK_RETRY_S = 0.2


class StateDirLocked(ConfigurationError, RuntimeError):
    """Another running instance holds this state directory."""


def check_writable(path: Path) -> None:
    """Create `path` (under --state-dir) and prove a file can be written in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StateDirUnusable(
            f"--state-dir: cannot create or write {path}: {exc.strerror}"
        ) from None


class StateDirectory:
    def __init__(self, root: Path | str, application_id: str) -> None:
        self.path = Path(root) / application_id
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the directory for this instance; checked before anything else is set up."""
        check_writable(self.path)
        self._lock_fd = _flock(self.path / ".lock", 0.0)
        if self._lock_fd is None:
            raise StateDirLocked(
                f"{self.path} is in use by another instance; give each instance its own --state-dir"
            )

    def where(self, changelog_topic: str) -> str:
        """The start-up line that says where the run keeps its state, and what it is."""
        return (
            f"local state in {self.path.absolute()} (--state-dir; a cache of the changelog "
            f"topic {changelog_topic}, rebuilt from it when missing)"
        )

    def lock_worker(self, index: int, wait_s: float = WORKER_LOCK_WAIT_S) -> None:
        """Take worker `index`'s place in the directory (its supervisor holds the directory)."""
        check_writable(self.path)
        self._lock_fd = _flock(self.path / f".worker-{index}.lock", wait_s)
        if self._lock_fd is None:
            raise StateDirLocked(
                f"{self.path}: worker {index} of an earlier run still holds .worker-{index}.lock "
                f"after {wait_s:.0f} s"
            )

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def process_id(self) -> str:
        """Kept across restarts: a restarted instance fences its own dead transaction at once
        instead of waiting for the broker's transaction timeout."""
        path = self.path / "process-id"
        if path.exists():
            return path.read_text().strip()
        pid = uuid.uuid4().hex
        tmp = path.with_suffix(".tmp")
        tmp.write_text(pid)
        tmp.replace(path)
        return pid

    def recorded_workers(self) -> int:
        """How many workers' transactional ids may have an open transaction from earlier runs."""
        try:
            return max(1, int((self.path / "workers").read_text()))
        except (OSError, ValueError):
            return 1

    def record_workers(self, count: int) -> None:
        tmp = self.path / "workers.tmp"
        tmp.write_text(str(count))
        tmp.replace(self.path / "workers")

    def store_path(self, changelog_topic: str, partition: int) -> Path:
        return self.path / f"{changelog_topic}-{partition}"


def _flock(path: Path, wait_s: float) -> int | None:
    """An open descriptor of `path` holding its exclusive lock; None when another process still
    held it after `wait_s`."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(_LOCK_RETRY_S)
