"""When a rise in unresolved events or dead letters deserves a warning.

Checked at each progress line. A counter *jumps* when, since the previous progress line, it rose
by at least MIN_RISE and its share of the records read in that interval is at least FACTOR times
its usual share: the larger of its share over the whole run before and its share in the
previous interval. So the first burst warns, a steady rate warns once (when it starts) rather
than every interval, a slow climb does not warn, and a rate that doubles at once warns again. An
interval in which the counter rose with no record read (handoff timeouts emitting unresolved
events) counts as one record, so such a burst warns too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# counter -> how a warning names it
WATCHED = {"unresolved_events": "unresolved events", "dead_letters": "dead letters"}
MIN_RISE = 10
FACTOR = 2.0


@dataclass(frozen=True)
class Jump:
    counter: str
    rise: int  # since the previous check
    records: int  # records read since the previous check
    share: float  # rise / records
    share_before: float  # its usual share: the run before, or the previous interval

    def describe(self) -> str:
        return (
            f"{WATCHED.get(self.counter, self.counter)} jumped: +{self.rise} over "
            f"{self.records} records ({self.share:.1%}; {self.share_before:.1%} before)"
        )


class JumpWatch:
    """Keeps the totals of the previous check."""

    def __init__(
        self,
        totals: Mapping[str, int] | None = None,
        records: int = 0,
        min_rise: int = MIN_RISE,
        factor: float = FACTOR,
    ) -> None:
        """`totals` and `records`: where the run stands when watching starts."""
        self.min_rise = min_rise
        self.factor = factor
        self._records = records
        self._totals = {counter: int((totals or {}).get(counter, 0)) for counter in WATCHED}
        self._last_share = dict.fromkeys(WATCHED, 0.0)

    def check(self, totals: Mapping[str, int], records: int) -> list[Jump]:
        """The jumps since the previous check; `totals` and `records` are run totals."""
        interval_records = max(records - self._records, 0)
        jumps = []
        for counter in WATCHED:
            now, before = int(totals.get(counter, 0)), self._totals.get(counter, 0)
            rise = now - before
            share = rise / max(interval_records, 1)
            usual = max(before / self._records if self._records else 0.0, self._last_share[counter])
            self._last_share[counter] = share
            if rise >= self.min_rise and share >= self.factor * usual:
                jumps.append(Jump(counter, rise, interval_records, share, usual))
        self._records = records
        self._totals = {counter: int(totals.get(counter, 0)) for counter in WATCHED}
        return jumps
