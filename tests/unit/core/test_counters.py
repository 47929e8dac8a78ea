"""One list of counter names (hydrator/core/counters.py): every count the core or an engine can
emit is in it, each listed name is counted somewhere, and the Spark engine's observed metrics
carry the whole list."""

from __future__ import annotations

import ast
from pathlib import Path

import hydrator
from hydrator.core.counters import CORE_COUNTERS, COUNTER_NAMES, COUNTERS, counters_of
from hydrator.engines.spark.stateful import COUNTERS as SPARK_OBSERVED
from hydrator.engines.spark.stateful import PARKED_KEYS_CHANGE, STATE_BYTES_CHANGE

PACKAGE = Path(hydrator.__file__).parent


def _counted_names(path: Path) -> set[str]:
    """Every string used as a count's name in a module: a key of a dict literal given as
    `counts=` or assigned to a name ending in `counts`, a `Counter(...)`'s dict, and a constant
    subscript of anything ending in `counts` (`counts["x"]`, `self._counts.batch(t)["x"]`)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())

    def keys(node: ast.AST | None) -> None:
        if isinstance(node, ast.Dict):
            names.update(k.value for k in node.keys if isinstance(k, ast.Constant))

    def counts_like(node: ast.AST) -> bool:
        if isinstance(node, ast.Call):  # counts.batch(topic)
            node = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        return name.endswith("counts") or name.endswith("totals")

    for node in ast.walk(tree):
        given = isinstance(node, ast.keyword) and node.arg == "counts"
        assigned = isinstance(node, ast.Assign) and any(counts_like(t) for t in node.targets)
        if given or assigned:
            keys(node.value)  # type: ignore[union-attr]
        elif isinstance(node, ast.Subscript) and counts_like(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                names.add(node.slice.value)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Counter":
            for arg in node.args:
                keys(arg)
    return names


def _counted_in(folder: str) -> dict[str, set[str]]:
    return {
        str(path.relative_to(PACKAGE)): _counted_names(path)
        for path in sorted((PACKAGE / folder).rglob("*.py"))
    }


def test_the_scan_finds_the_core_s_counts() -> None:
    found = set().union(*_counted_in("core").values())
    assert {"events", "filled_columns", "handoffs_sent", "dead_letters", "tick_failures"} <= found


def test_every_count_the_core_can_emit_is_in_the_list() -> None:
    for module, names in _counted_in("core").items():
        assert names <= set(CORE_COUNTERS), f"{module}: {sorted(names - set(CORE_COUNTERS))}"


def test_every_count_an_engine_keeps_is_in_the_list() -> None:
    for engine in ("embedded", "spark"):
        listed = {spec.name for spec in counters_of(engine)}
        listed |= {PARKED_KEYS_CHANGE, STATE_BYTES_CHANGE}
        for module, names in _counted_in(f"engines/{engine}").items():
            assert names <= listed, f"{module}: {sorted(names - listed)}"


def test_every_listed_counter_is_counted_somewhere() -> None:
    """No stale name: each is counted by the code its entry says counts it."""
    where = {
        "core": ("core",),
        "embedded": ("engines/embedded",),
        "spark": ("engines/spark",),
        "engines": ("engines/embedded", "engines/spark"),
    }
    for spec in COUNTERS:
        for place in where[spec.source]:
            counted = set().union(*_counted_in(place).values())
            assert spec.name in counted, f"{spec.name} ({spec.source}) is not counted in {place}"


def test_names_are_unique_and_fit_prometheus() -> None:
    assert len(set(COUNTER_NAMES)) == len(COUNTER_NAMES)
    for name in COUNTER_NAMES:
        assert name.isidentifier() and name.islower() and not name.endswith("_total"), name


def test_the_spark_engine_observes_every_counter_it_keeps() -> None:
    """Its group function reports counts as an array with one place per name: a name left out
    would be dropped without a word."""
    changes = (PARKED_KEYS_CHANGE, STATE_BYTES_CHANGE)
    assert (*(s.name for s in counters_of("spark")), *changes) == SPARK_OBSERVED
    assert set(CORE_COUNTERS) <= set(SPARK_OBSERVED)
    assert not set(changes) & set(COUNTER_NAMES)  # gauges' changes: they also fall
