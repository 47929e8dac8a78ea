"""Every module imports on its own, in a fresh interpreter, and dependencies run one way: the
format boundary (hydrator.events) and state at the bottom, codecs and the core on top of them,
engines and the CLI on top of those."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hydrator
import state

ROOT = Path(__file__).resolve().parents[2]

# Each fresh interpreter imports one module and reports which of the project's it loaded.
_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("hydrator", "state"))))
"""


def _modules() -> list[str]:
    names = []
    for package in (hydrator, state):
        names.append(package.__name__)
        prefix = package.__name__ + "."
        names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]
    return sorted(names)


def _loaded_by(module: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, module],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, f"import {module} failed:\n{done.stderr}"
    return json.loads(done.stdout.splitlines()[-1])


def test_every_module_imports_on_its_own_in_a_fresh_interpreter() -> None:
    modules = _modules()
    assert "hydrator.formats.debezium" in modules and "state.codec" in modules
    with ThreadPoolExecutor(max_workers=2) as pool:
        loaded = dict(zip(modules, pool.map(_loaded_by, modules), strict=True))
    _check_layers(loaded)


def _check_layers(loaded: dict[str, list[str]]) -> None:
    def reaches(module: str, prefix: str) -> list[str]:
        return [m for m in loaded[module] if m == prefix or m.startswith(prefix + ".")]

    # the bottom imports nothing of the package but the kinds of error every layer raises
    assert set(loaded["hydrator.errors"]) <= {"hydrator", "hydrator.errors"}
    assert set(loaded["hydrator.events"]) <= {"hydrator", "hydrator.events", "hydrator.errors"}
    for module in loaded:
        if module.startswith("state"):
            assert not reaches(module, "hydrator.core"), module
            assert not reaches(module, "hydrator.formats"), module
            assert not reaches(module, "hydrator.engines"), module
        if module.startswith("hydrator.formats"):
            assert not reaches(module, "hydrator.core"), module
            assert not reaches(module, "state"), module
            assert not reaches(module, "hydrator.engines"), module
        if module.startswith("hydrator.core"):
            assert not reaches(module, "hydrator.formats"), module
            assert not reaches(module, "hydrator.engines"), module
