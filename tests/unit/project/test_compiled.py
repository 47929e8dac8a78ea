"""The compiled core (setup.py) and HYDRATOR_COMPILED=0, which imports the interpreted one. The
unit suite runs on each (`make test`, `make test-pure`); the first test says which way it runs,
so a compile that silently fell back to the interpreted modules fails CI instead of passing on
them."""

from __future__ import annotations

import ast
import importlib
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

import hydrator
from tests.harness.compiled import EXTENSION, ROOT, SOURCES, compiled_modules

INTERPRETED = os.environ.get(hydrator.COMPILED_SWITCH) == "0"


def test_the_core_runs_the_way_this_run_asks() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if not INTERPRETED and shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): the install is interpreted")
    ending = ".py" if INTERPRETED else EXTENSION
    for name in compiled_modules():
        module = importlib.import_module(name)
        assert (module.__file__ or "").endswith(ending), f"{name} is {module.__file__}"
    assert hydrator.core_build() == ("interpreted" if INTERPRETED else "compiled")


def test_the_switch_reaches_a_fresh_process_and_loads_no_compiled_module() -> None:
    probe = (
        "import sys, state.codec, hydrator.core.rules as rules; "
        "print(rules.__file__); print(sorted(m for m in sys.modules if 'mypyc' in m))"
    )
    env = {**os.environ, hydrator.COMPILED_SWITCH: "0"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    path, mypyc_modules = done.stdout.splitlines()
    assert path.endswith("rules.py") and mypyc_modules == "[]"


def test_what_the_spark_engine_ships_to_its_workers_pickles() -> None:
    """The engine ships its specs and functions (cloudpickle); a compiled module's functions
    and classes go by reference. (Compiled instances do not pickle unless their class says how:
    none is shipped, docs/architecture.md.)"""
    from pyspark import cloudpickle

    from hydrator.core.rules import hydrate
    from hydrator.engines.spark.stateful import HydratorSpec, hydrator_for
    from state.codec import decode_state, encode_state
    from state.record import StateRecord

    spec = HydratorSpec(format="debezium")
    state = encode_state(StateRecord({"a": 1}, (1, 2), False, 3))
    shipped = cloudpickle.dumps(lambda: (hydrator_for(spec), decode_state(state), hydrate))
    built, decoded, function = pickle.loads(shipped)()
    assert type(built).__name__ == "Hydrator" and decoded.image == {"a": 1}
    assert function is hydrate


def _written_out_initialisers() -> Iterator[tuple[str, list[str], list[str], set[str]]]:
    """(class, fields, __init__ parameters, attributes it assigns) of every dataclass in the
    compiled modules that writes its `__init__` out."""
    for source in SOURCES:
        tree = ast.parse((ROOT / source).read_text())
        for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
            init = next(
                (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"),
                None,
            )
            decorators = [ast.unparse(d) for d in cls.decorator_list]
            if init is None or not any(d.startswith("dataclass") for d in decorators):
                continue
            fields = [
                node.target.id
                for node in cls.body
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            ]
            parameters = [arg.arg for arg in init.args.args[1:]]
            assigned = {
                target.attr
                for node in ast.walk(init)
                if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Attribute)
            }
            yield f"{source}:{cls.name}", fields, parameters, assigned


def test_a_written_out_initialiser_takes_and_sets_every_field_in_order() -> None:
    """A compiled dataclass's generated `__init__` is interpreted, so the per-event ones write
    theirs out; a field added to the class but not to its `__init__` fails here."""
    checked = []
    for name, fields, parameters, assigned in _written_out_initialisers():
        assert parameters == fields, name
        assert assigned == set(fields), name
        checked.append(name.rpartition(":")[2])
    assert {"StateRecord", "ChangeEvent", "Transition", "Read"} <= set(checked)


@pytest.mark.parametrize("format_name", ["debezium", "auto"])
def test_an_event_with_nothing_to_fill_goes_out_as_its_own_bytes(format_name: str) -> None:
    """Not parsed and written again: the output holds the input's bytes object itself."""
    from hydrator.core import HydrationSettings, Hydrator, RawRecord
    from hydrator.formats import codec_for

    hydrator = Hydrator(codec_for(format_name), HydrationSettings(fill_before=False))
    create = b'{"before":null,"after":{"id":1,"doc":"x"},"source":{"lsn":1},"op":"c"}'
    update = b'{"before":null,"after":{"id":1,"doc":"y"},"source":{"lsn":2},"op":"u"}'
    state = None
    for offset, value in enumerate((create, update)):
        raw = RawRecord("t", 0, offset, b'{"id":1}', value)
        key = hydrator.route(raw)
        step = hydrator.process(state, raw, key if isinstance(key, str) else None, 0)
        state = step.state
        assert step.emitted[0].value is value


# -- an edited source runs as edited (hydrator/__init__.py) -------------------------------------


def _tree(base: Path, project: bool, source_newer: bool) -> Path:
    """A source tree with one compiled module, `hydrator/core/rules.py`, built at t=1000."""
    (base / "hydrator" / "core").mkdir(parents=True)
    if project:
        (base / "pyproject.toml").write_text(
            '[tool.toast-hydrator]\ncompiled = ["hydrator/core/rules.py"]\n'
        )
    built = [
        base / "hydrator" / f"_compiled__mypyc{EXTENSION}",
        base / f"hydrator/core/rules{EXTENSION}",
    ]
    source = base / "hydrator" / "core" / "rules.py"
    for path in (*built, source):
        path.write_bytes(b"")
        os.utime(path, (1000, 1000))
    if source_newer:
        os.utime(source, (1001, 1001))
    return base


def test_a_source_newer_than_its_compiled_module_is_stale(tmp_path: Path) -> None:
    edited = _tree(tmp_path / "edited", project=True, source_newer=True)
    assert hydrator.stale_compiled_sources(edited) == ["hydrator/core/rules.py"]
    built = _tree(tmp_path / "built", project=True, source_newer=False)
    assert hydrator.stale_compiled_sources(built) == []
    # an installed package (no pyproject.toml beside it) runs what it was built with
    installed = _tree(tmp_path / "installed", project=False, source_newer=True)
    assert hydrator.stale_compiled_sources(installed) == []


_BUILD_PROBE = """
import sys
# the project's editable install may put its own finder ahead of sys.path: drop it
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
import hydrator, hydrator.core.rules as rules
assert hydrator.__file__.startswith(sys.argv[1]), hydrator.__file__
print(rules.__file__)
print(hydrator.core_build())
"""


def _copy_of_the_packages(target: Path, project: bool) -> Path:
    for package in ("hydrator", "state"):
        shutil.copytree(
            ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    if project:
        shutil.copy2(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target


def _probe(tree: Path) -> tuple[str, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(hydrator.COMPILED_SWITCH)}
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_PROBE, str(tree)],
        capture_output=True,
        text=True,
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    path, build = done.stdout.split()
    return path, build, done.stderr


@pytest.mark.skipif(INTERPRETED, reason="the interpreted modules run: nothing is compiled")
def test_an_edited_source_of_a_compiled_module_runs_and_says_so(tmp_path: Path) -> None:
    if hydrator.core_build() != "compiled":
        pytest.skip("this install is interpreted")
    tree = _copy_of_the_packages(tmp_path / "editable", project=True)
    path, build, said = _probe(tree)
    assert (build, said) == ("compiled", "") and not path.endswith(".py")
    edited = tree / "state" / "codec.py"
    later = (tree / "state" / f"codec{EXTENSION}").stat().st_mtime + 60  # after its build
    os.utime(edited, (later, later))
    path, build, said = _probe(tree)
    assert path.endswith("rules.py") and build == "interpreted"  # all of them or none
    (line,) = said.splitlines()
    assert "state/codec.py changed after it was compiled" in line and "`make setup`" in line
    # the same files installed (no source tree around them): the compiled build runs
    installed = _copy_of_the_packages(tmp_path / "installed", project=False)
    os.utime(installed / "state" / "codec.py", (later, later))
    path, build, said = _probe(installed)
    assert (build, said) == ("compiled", "") and not path.endswith(".py")
