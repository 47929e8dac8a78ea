"""The peer's own virtualenv: Quix Streams 3.28 pins an older confluent-kafka than the project,
so it cannot share the project's environment. Made once, from PyPI, under the user's cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

QUIX_REQUIREMENT = "quixstreams>=3.28,<3.29"
QUIX_VERSION_PREFIX = "3.28."


def default_location() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "toast-hydrator-bench" / "quix-venv"


def installed_version(python: Path) -> str | None:
    if not python.exists():
        return None
    done = subprocess.run(
        [str(python), "-c", "import quixstreams; print(quixstreams.__version__)"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def quix_python(location: Path, log: Path) -> Path:
    """The venv's interpreter, with Quix Streams 3.28 installed (made here if missing).
    Raises RuntimeError naming the log when it cannot be made."""
    python = location / "bin" / "python"
    version = installed_version(python)
    if version is not None and version.startswith(QUIX_VERSION_PREFIX):
        return python
    print(f"making the Quix Streams venv at {location} (once; log: {log})", file=sys.stderr)
    with open(log, "ab") as out:
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(location)],
            [str(python), "-m", "pip", "install", "--quiet", QUIX_REQUIREMENT],
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                raise RuntimeError(f"`{' '.join(step)}` failed; see {log}")
    version = installed_version(python)
    if version is None or not version.startswith(QUIX_VERSION_PREFIX):
        raise RuntimeError(f"the venv at {location} has quixstreams {version}, not 3.28")
    return python
