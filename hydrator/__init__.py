"""toast-hydrator: keep the last full row per primary key, fill what CDC events leave out.

The modules an event's path spends its time in are compiled by mypyc where the install could
(setup.py): each compiled module sits beside its source and is imported in its place.
HYDRATOR_COMPILED=0 in the environment imports the sources instead, for this process and the
processes it starts (a compiled module calls the others of its group directly: it is all of them
or none). `core_build()` says which way this process runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

__version__ = "0.1.0"
COMPILED_SWITCH = "HYDRATOR_COMPILED"


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


def core_build() -> str:
    """`compiled` or `interpreted`: how this process runs the core."""
    from hydrator.core import rules

    return "interpreted" if (rules.__file__ or "").endswith(".py") else "compiled"


if os.environ.get(COMPILED_SWITCH) == "0" and not any(
    isinstance(finder, _SourcesFirst) for finder in sys.meta_path
):
    sys.meta_path.insert(0, _SourcesFirst())
