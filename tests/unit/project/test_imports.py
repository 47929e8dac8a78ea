"""Every module imports on its own, in a fresh interpreter, and dependencies run one way: the
format boundary (hydrator.events) and state at the bottom, codecs and the core on top of them,
the topic layout and record emission both engines share (hydrator.topology) above the core, the
engines and the CLI on top of those. The two engines do not import each other, no engine imports
a command's package (what an engine shares with a command lives below both: hydrator.seeding,
hydrator.reselect), and no areas import each other round a cycle, counting the imports inside
functions too (read from the sources: the package root imports none of its areas)."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hydrator
import state

ROOT = Path(__file__).resolve().parents[3]

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


# The packages of commands other than `hydrator run` (and the CLI itself): no engine imports them.
COMMAND_PACKAGES = (
    "hydrator.bootstrap",
    "hydrator.cli",
    "hydrator.demo",
    "hydrator.dev",
    "hydrator.live",
    "hydrator.ops",
)


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
        if module.startswith("hydrator.engines"):
            for command in COMMAND_PACKAGES:
                assert not reaches(module, command), f"{module} imports {command}"
    _check_no_two_areas_import_each_other(loaded)


def area(module: str) -> str:
    """`hydrator.ops.logs` -> `hydrator.ops`; each engine is an area of its own, `state` one,
    each module of the bench one (`bench.core`)."""
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


def _imports_in_sources() -> dict[str, set[str]]:
    """module -> the project's modules its source imports, anywhere in it (a function's late
    import too), for the packages and the bench."""
    files = {}
    for top in ("hydrator", "state", "bench"):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            package = parts[:-1]  # of a module, and of a package's __init__ alike
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = (path, ".".join(package))
    graph: dict[str, set[str]] = {}
    for name, (path, package) in files.items():
        found = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in files)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                submodules = {f"{base}.{alias.name}" for alias in node.names} & files.keys()
                found.update(submodules or ({base} & files.keys()))
        found.discard(name)
    return graph


def _is_script(module: str) -> bool:
    """A module run as a program (`python -m`, spark-submit's `hydrator/spark_app/main.py`),
    never imported: the top of the graph, an area of its own."""
    if module.endswith(".__main__"):
        return True
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return path.is_file() and 'if __name__ == "__main__":' in path.read_text()


def test_no_areas_import_each_other_round_a_cycle_in_the_sources() -> None:
    reached: dict[str, set[str]] = {}
    graph = _imports_in_sources()

    def area_of(module: str) -> str:
        return module if _is_script(module) else area(module)

    for module, imported in graph.items():
        here = area_of(module)
        reached.setdefault(here, set()).update(area_of(m) for m in imported if area_of(m) != here)
    assert not reached.get("hydrator"), "the package root imports the package's modules"
    cycles = _cycles(reached)
    assert cycles == [], f"areas that import each other round a cycle: {cycles}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components
