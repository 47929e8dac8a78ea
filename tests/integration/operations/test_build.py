"""`pip wheel` of the project as a user's `pip install` builds it (setup.py): compiled where a
C compiler works, and the interpreted modules with one line saying why where it does not, or
where HYDRATOR_COMPILED=0 asks for them. The install never fails for want of a compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness.compiled import EXTENSION, ROOT, SOURCES

pytestmark = pytest.mark.integration

FALLBACK = "toast-hydrator: installing the interpreted modules only: "


def _wheel(tmp_path: Path, **env: str) -> tuple[list[str], str]:
    """The files of the wheel built from a copy of the sources, and the build's output."""
    source = tmp_path / "project"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".*", "*.so", "__pycache__", "build", "tests", "docs"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", "dist", "./project"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env},
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return [wheel.name, *archive.namelist()], output


def _interpreted(files: list[str]) -> None:
    assert not [name for name in files if name.endswith(".so")]
    assert set(SOURCES) <= set(files)


def test_the_wheel_holds_the_compiled_modules_beside_their_sources(tmp_path: Path) -> None:
    files, output = _wheel(tmp_path)
    assert FALLBACK not in output
    for source in SOURCES:
        assert source in files and source.removesuffix(".py") + EXTENSION in files
    assert "hydrator/_compiled__mypyc" + EXTENSION in files


def test_without_a_working_compiler_the_interpreted_modules_install(tmp_path: Path) -> None:
    files, output = _wheel(tmp_path, CC="false")  # every compile fails
    assert FALLBACK + "compiling failed" in output
    _interpreted(files[1:])


def test_hydrator_compiled_0_builds_a_wheel_of_the_sources_only(tmp_path: Path) -> None:
    files, output = _wheel(tmp_path, HYDRATOR_COMPILED="0")
    assert FALLBACK + "HYDRATOR_COMPILED=0" in output
    assert files[0].endswith("-py3-none-any.whl")
    _interpreted(files[1:])
