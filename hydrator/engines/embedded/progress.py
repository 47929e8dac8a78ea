"""One log line every few seconds: throughput, lag per input, parked keys, dead letters."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping

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
        self._last_records = 0

    def maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._last_at >= self._interval_s:
            self.log(now)

    def log(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        records = self._counts["records"]
        rate = (records - self._last_records) / max(now - self._last_at, 1e-9)
        lag = " ".join(f"{topic}={n}" for topic, n in self._lag().items()) or "-"
        log.info(
            "%.0f records/s, lag %s, parked %d, dead letters %d, records %d, commits %d",
            rate,
            lag,
            self._parked(),
            self._counts["dead_letters"],
            records,
            self._counts["commits"],
        )
        self._last_at = now
        self._last_records = records
