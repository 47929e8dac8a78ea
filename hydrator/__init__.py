"""toast-hydrator: keep the last full row per primary key, fill what CDC events leave out.

The modules an event's path spends its time in are compiled by mypyc where the install could
(setup.py): each compiled module sits beside its source and is imported in its place.
HYDRATOR_COMPILED=0 in the environment imports the sources instead, for this process and the
processes it starts (a compiled module calls the others of its group directly: it is all of them
or none). `core_build()` says which way this process runs.

In a source tree (an editable install: `pyproject.toml` beside the packages) a source edited
after it was compiled would not run: its compiled module would still be imported. So there the
sources are imported whenever one of them is newer than its compiled module, and the process
says so once on stderr, naming the rebuild (`make setup`). An installed package (`pip install`)
has no `pyproject.toml` beside it, and always runs what it was built with.

This module imports nothing of the package (the package's modules all import it first).
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

__version__ = "0.1.0"
COMPILED_SWITCH = "HYDRATOR_COMPILED"
# Set for the processes this one starts once it has said that the sources run (they choose the
# sources for themselves, silently).
STALE_ANNOUNCED = "HYDRATOR_COMPILED_STALE_ANNOUNCED"
REBUILD = "make setup"
# The directory holding the `hydrator` and `state` packages.
_TREE = Path(__file__).resolve().parent.parent
# The module whose origin tells how this process runs the core (`core_build`).
_WITNESS = "hydrator.core.rules"


class _SourcesFirst:
    """Finds this package's and `state`'s modules from their `.py` even where a compiled one
    stands beside it (sys.meta_path)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(("hydrator.", "state.")):
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or spec.submodule_search_locations is not None:
            return spec
        source = Path(spec.origin).with_name(fullname.rpartition(".")[2] + ".py")
        if spec.origin.endswith(".py") or not source.is_file():
            return spec
        return spec_from_file_location(fullname, source)


def stale_compiled_sources(tree: Path = _TREE) -> list[str]:
    """The compiled modules' sources in the source tree `tree` (relative paths, as
    `[tool.toast-hydrator] compiled` in its pyproject.toml lists them) that changed after their
    compiled module beside them was built. None in an installed package (no pyproject.toml)
    or a tree built without compiling."""
    project = tree / "pyproject.toml"
    if not project.is_file() or not any((tree / "hydrator").glob("_compiled__mypyc*")):
        return []
    try:
        sources = tomllib.loads(project.read_text())["tool"]["toast-hydrator"]["compiled"]
    except (OSError, ValueError, KeyError):
        return []
    stale = []
    for source in sources:
        built = _compiled_beside(tree / source)
        if built is not None and (tree / source).stat().st_mtime > built.stat().st_mtime:
            stale.append(source)
    return stale


def _compiled_beside(source: Path) -> Path | None:
    for suffix in EXTENSION_SUFFIXES:
        built = source.with_name(source.stem + suffix)
        if built.is_file():
            return built
    return None


def _announce_stale(stale: list[str]) -> None:
    if os.environ.get(STALE_ANNOUNCED):
        return
    os.environ[STALE_ANNOUNCED] = "1"
    named = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
    print(
        f"toast-hydrator: {named} changed after it was compiled: running the interpreted "
        f"sources (slower) until `{REBUILD}` compiles them again ({COMPILED_SWITCH}=0 "
        "chooses them without this warning)",
        file=sys.stderr,
        flush=True,
    )


def _sources_chosen() -> bool:
    return any(isinstance(finder, _SourcesFirst) for finder in sys.meta_path)


def core_build() -> str:
    """`compiled` or `interpreted`: how this process runs the core (told without importing
    it: where the import system finds, or found, the core's rules)."""
    module = sys.modules.get(_WITNESS)
    if module is not None:
        origin = module.__file__ or ""
    elif _sources_chosen():
        return "interpreted"
    else:
        spec = PathFinder.find_spec(_WITNESS, [str(_TREE / "hydrator" / "core")])
        origin = (spec.origin if spec is not None else None) or ""
    return "interpreted" if origin.endswith(".py") else "compiled"


def _choose_modules() -> None:
    if _sources_chosen():
        return
    if os.environ.get(COMPILED_SWITCH) != "0":
        stale = stale_compiled_sources()
        if not stale:
            return
        _announce_stale(stale)
    sys.meta_path.insert(0, _SourcesFirst())


_choose_modules()
