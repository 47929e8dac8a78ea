"""One log line every few seconds: throughput, lag per input, parked keys, dead letters; and a
warning when unresolved events or dead letters jump (hydrator/ops/jumps.py)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping

from hydrator.ops.jumps import JumpWatch

log = logging.getLogger("hydrator.progress")


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
            "%.0f records/s, lag %s, parked %d, dead letters %d, records %d, commits %d",
            rate,
            lag,
            parked,
            self._counts["dead_letters"],
            records,
            self._counts["commits"],
            extra={"counts": counts, "lag": lags, "parked_keys": parked, "rate": round(rate, 1)},
        )
        for jump in self._jumps.check(self._counts, records):
            log.warning(
                jump.describe(),
                extra={"counter": jump.counter, "rise": jump.rise, "records": jump.records},
            )
        self._last_at = now
        self._last_records = records
