"""The counts of a progress or totals line as words, the same for both engines:
`events 120, filled columns 300, unresolved events 2, dead letters 1, passthrough 4`.

The headline counts (what a user watches first: was anything filled, left unresolved, dead
lettered?) always show, zeros too; any other counter shows once it is not zero. Signed
changes such as the Spark engine's state-bytes delta are not counts and never show: the
state-bytes gauge (metrics) is where that figure belongs.
"""

from __future__ import annotations

from collections.abc import Mapping

from hydrator.core.counters import COUNTERS

HEADLINE = ("events", "filled_columns", "unresolved_events", "dead_letters")
_ORDER = {spec.name: index for index, spec in enumerate(COUNTERS)}


def headline_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """The headline counts, zeros included (fields of a json progress line)."""
    return {name: int(counts.get(name, 0)) for name in HEADLINE}


def shown_counts(counts: Mapping[str, int], headline: tuple[str, ...] = HEADLINE) -> dict[str, int]:
    """The counts a line shows, in order: the headline, then every other non-zero counter."""
    shown = {name: int(counts.get(name, 0)) for name in headline}
    others = sorted(
        (name for name, n in counts.items() if n and name not in shown and name in _ORDER),
        key=_ORDER.__getitem__,
    )
    return shown | {name: int(counts[name]) for name in others}


def describe_counts(counts: Mapping[str, int], headline: tuple[str, ...] = HEADLINE) -> str:
    """`events 12, filled columns 30, unresolved events 0, dead letters 1`."""
    return ", ".join(
        f"{name.replace('_', ' ')} {n}" for name, n in shown_counts(counts, headline).items()
    )
