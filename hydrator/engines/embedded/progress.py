"""One log line every few seconds: throughput, lag per input, filled columns, unresolved
events, parked keys, dead letters; and a warning when unresolved events or dead letters jump
(hydrator/metrics/jumps.py).

The line is the run's. With --workers the supervisor logs it (`RunProgress`), from what each
worker reports (`Reporter`), so it shows the same totals a run in one process would.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from hydrator.metrics.count_line import headline_counts
from hydrator.metrics.jumps import JumpWatch

log = logging.getLogger("hydrator.progress")


class ProgressSink(Protocol):
    """What the loop tells about its progress: now and then, and once at its end."""

    def maybe_log(self) -> None: ...

    def log(self) -> None: ...


class Progress:
    def __init__(
        self,
        counts: Counter[str],
        lag: Callable[[], Mapping[str, int]],
        parked: Callable[[], int],
        interval_s: float = 10.0,
    ) -> None:
        self._counts = counts
        self._lag = lag
        self._parked = parked
        self._interval_s = interval_s
        self._last_at = time.monotonic()
        # The counts outlive an in-process restart, which makes a new Progress: start from them.
        self._last_records = counts["records"]
        self._jumps = JumpWatch(counts, counts["records"])

    def maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._last_at >= self._interval_s:
            self.log(now)

    def log(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        records = self._counts["records"]
        rate = (records - self._last_records) / max(now - self._last_at, 1e-9)
        lags = dict(self._lag())
        lag = " ".join(f"{topic}={n}" for topic, n in lags.items()) or "-"
        parked = self._parked()
        counts = {name: n for name, n in self._counts.items() if n}
        log.info(
            "%.0f records/s, filled columns %d, unresolved events %d, lag %s, parked %d, "
            "dead letters %d, records %d, commits %d",
            rate,
            self._counts["filled_columns"],
            self._counts["unresolved_events"],
            lag,
            parked,
            self._counts["dead_letters"],
            records,
            self._counts["commits"],
            extra={
                "counts": counts,
                "lag": lags,
                "parked_keys": parked,
                "rate": round(rate, 1),
                **headline_counts(self._counts),
            },
        )
        for jump in self._jumps.check(self._counts, records):
            log.warning(
                jump.describe(),
                extra={"counter": jump.counter, "rise": jump.rise, "records": jump.records},
            )
        self._last_at = now
        self._last_records = records


@dataclass(frozen=True)
class Report:
    """One worker's part of the progress line: its committed counts (since its process
    started), the lag of its partitions per input topic, its parked keys."""

    counts: dict[str, int]
    lag: dict[str, int]
    parked: int


class Reporter:
    """A worker's stand-in for `Progress`: sends a `Report` about every second (and at the end)
    instead of logging."""

    def __init__(
        self,
        counts: Counter[str],
        lag: Callable[[], Mapping[str, int]],
        parked: Callable[[], int],
        send: Callable[[Report], None],
        interval_s: float = 1.0,
    ) -> None:
        self._counts = counts
        self._lag = lag
        self._parked = parked
        self._send = send
        self._interval_s = interval_s
        self._last_at = 0.0

    def maybe_log(self) -> None:
        if time.monotonic() - self._last_at >= self._interval_s:
            self.log()

    def log(self) -> None:
        self._last_at = time.monotonic()
        counts = {name: n for name, n in self._counts.items() if n}
        self._send(Report(counts, dict(self._lag()), self._parked()))


class RunProgress:
    """The supervisor's side: the run's progress line from its workers' reports. The counts of
    a worker's ended processes stay in the totals. Lag and parked keys are those of the running
    workers; the last line, once all ended, shows what each had at its end (as a run in one
    process shows at its end)."""

    def __init__(self, interval_s: float) -> None:
        self._running: dict[int, Report] = {}
        self._at_end: dict[int, Report] = {}  # each ended worker's last report
        self._ended_counts: Counter[str] = Counter()
        self._totals: Counter[str] = Counter()
        self._shown = self._running
        self._progress = Progress(self._totals, self._lag, self._parked, interval_s)

    def report(self, worker: int, report: Report) -> None:
        self._running[worker] = report
        self._at_end.pop(worker, None)

    def ended(self, worker: int) -> None:
        """`worker`'s process ended (it may be started again, from zero)."""
        last = self._running.pop(worker, None)
        if last is not None:
            self._ended_counts.update(last.counts)
            self._at_end[worker] = last

    def maybe_log(self) -> None:
        if not self._running and not self._at_end:
            return  # no worker got as far as running yet (a broker still awaited): nothing to say
        self._sum()
        self._progress.maybe_log()

    def log_last(self) -> None:
        """The run's last line, once every worker ended (none if none got as far as running)."""
        if self._at_end or self._running:
            self._shown = {**self._at_end, **self._running}
            self._sum()
            self._progress.log()

    @property
    def totals(self) -> Counter[str]:
        """The run's counts: every worker's, ended processes included."""
        self._sum()
        return self._totals

    def _sum(self) -> None:
        self._totals.clear()
        self._totals.update(self._ended_counts)
        for report in self._running.values():
            self._totals.update(report.counts)

    def _lag(self) -> dict[str, int]:
        lag: Counter[str] = Counter()
        for report in self._shown.values():
            lag.update(report.lag)
        return dict(lag)

    def _parked(self) -> int:
        return sum(report.parked for report in self._shown.values())
