"""The local state directory of one application instance.

<state-dir>/<application-id>/
    .lock             held while an instance runs: two instances must not share stores
    process-id        stable identity, so a restarted instance re-uses its transactional id
    <changelog>-<p>/  the RocksDB store of task p (a local copy of changelog partition p)
"""

from __future__ import annotations

import fcntl
import os
import uuid
from pathlib import Path


class StateDirLocked(RuntimeError):
    """Another running instance holds this state directory."""


class StateDirUnusable(RuntimeError):
    """The state directory cannot be created or written (a configuration problem)."""


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
    def __init__(self, root: Path, application_id: str) -> None:
        self.path = Path(root) / application_id
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the directory for this instance; checked before anything else is set up."""
        check_writable(self.path)
        fd = os.open(self.path / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateDirLocked(
                f"{self.path} is in use by another instance; give each instance its own --state-dir"
            ) from None
        self._lock_fd = fd

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

    def store_path(self, changelog_topic: str, partition: int) -> Path:
        return self.path / f"{changelog_topic}-{partition}"
