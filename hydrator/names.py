"""The name meant, when one given is not known: a misspelled option, variable or topic."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to `name`, when one is close enough to be what was meant."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return close[0] if close else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest candidate, or nothing."""
    meant = closest(name, candidates)
    return f" (did you mean {meant}?)" if meant is not None else ""
