"""Every module imports on its own, in a fresh interpreter, and dependencies run one way: the
format boundary (hydrator.events) and state at the bottom, codecs and the core on top of them,
the topic layout and record emission both engines share (hydrator.topology) above the core, the
engines and the CLI on top of those. The two engines do not import each other, and no two areas
import each other."""

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

# Each fresh interpreter imports one module and reports which of the project's it loaded (not
# the compiled modules' shared library, hydrator._compiled__mypyc: it is no layer's, setup.py).
_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("hydrator", "state") and not m.endswith("__mypyc")
)))
"""


def _modules() -> list[str]:
    names = []
    for package in (hydrator, state):
        names.append(package.__name__)
        prefix = package.__name__ + "."
        found = pkgutil.walk_packages(package.__path__, prefix)
        names += [m.name for m in found if not m.name.endswith("__mypyc")]
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
        if module.startswith(("hydrator.core", "hydrator.formats", "hydrator.kafka", "state")):
            assert not reaches(module, "hydrator.topology"), module
        if module.startswith("hydrator.topology"):
            assert not reaches(module, "hydrator.engines"), module
        # what both engines need lives below them (hydrator.topology, hydrator.kafka, ...)
        if module.startswith("hydrator.engines.spark"):
            assert not reaches(module, "hydrator.engines.embedded"), module
        if module.startswith("hydrator.engines.embedded"):
            assert not reaches(module, "hydrator.engines.spark"), module
    _check_no_two_areas_import_each_other(loaded)


def area(module: str) -> str:
    """`hydrator.ops.logs` -> `hydrator.ops`; each engine is an area of its own, `state` one."""
    parts = module.split(".")
    depth = 3 if parts[:2] == ["hydrator", "engines"] else 1 if parts[0] == "state" else 2
    return ".".join(parts[:depth])


def _check_no_two_areas_import_each_other(loaded: dict[str, list[str]]) -> None:
    reached: dict[str, set[str]] = {}
    for module, modules in loaded.items():
        here = area(module)
        reached.setdefault(here, set()).update(area(m) for m in modules if area(m) != here)
    # the packages themselves (`hydrator`, `hydrator.engines`) only name their parts
    for top in ("hydrator", "hydrator.engines"):
        reached.pop(top, None)
    cycles = sorted(
        (a, b) for a in reached for b in reached[a] if a < b and a in reached.get(b, set())
    )
    assert cycles == [], f"areas that import each other: {cycles}"
