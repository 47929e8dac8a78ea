"""The compiled modules (setup.py, `[tool.toast-hydrator] compiled` in pyproject.toml) as the
tests see them."""

from __future__ import annotations

import sysconfig
import tomllib
from pathlib import Path

from hydrator import stale_compiled_sources

ROOT = Path(__file__).resolve().parents[2]
SOURCES: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["toast-hydrator"][
    "compiled"
]
EXTENSION = str(sysconfig.get_config_var("EXT_SUFFIX"))


def compiled_modules() -> list[str]:
    """The dotted names of the modules the build compiles."""
    return [source.removesuffix(".py").replace("/", ".") for source in SOURCES]


def stale_compiled_modules() -> list[str]:
    """The sources in this tree that changed after their compiled module beside them was built
    (an editable install's): the package runs them interpreted (hydrator/__init__.py)."""
    return stale_compiled_sources(ROOT)
