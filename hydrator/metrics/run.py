"""RunMetrics: what an engine publishes for the exporter, and the health verdicts it answers.

The engine's thread writes; the HTTP server's threads read. Every write replaces a whole
immutable value (or a float), so a reader sees one publication or the next, never half of one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from prometheus_client import Histogram, disable_created_metrics

from hydrator.core.counters import CounterSpec, counters_of

# No `_created` series next to the histogram's (the process's own registry; nothing else uses it).
disable_created_metrics()

# Seconds: an embedded transaction commit takes milliseconds, a Spark micro-batch up to minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass(frozen=True)
class Counts:
    """Counter totals of the run, and the part of them each input topic accounts for."""

    totals: Mapping[str, int] = field(default_factory=dict)
    by_topic: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Gauges:
    """None: not known (yet)."""

    parked_keys: int | None = None
    state_keys: int | None = None
    state_bytes: int | None = None
    lag: Mapping[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str


OK = Verdict(True, "ok")


class Health(Protocol):
    """What /healthz and /readyz answer; called on the HTTP server's threads."""

    def alive(self) -> Verdict: ...

    def ready(self) -> Verdict: ...


class RunMetrics:
    def __init__(
        self,
        application_id: str,
        engine: Literal["embedded", "spark"],
        topics: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`topics`: the input topics the engine attributes counts to (none: all unattributed)."""
        self.application_id = application_id
        self.counters: tuple[CounterSpec, ...] = counters_of(engine)
        self.topics = tuple(topics)
        self.counts = Counts()
        self.gauges = Gauges()
        self.commit_latency = Histogram(
            "hydrator_commit_latency_seconds",
            "Embedded: transaction commit time; Spark: micro-batch duration.",
            ["application_id"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self._latency = self.commit_latency.labels(application_id)
        self._clock = clock
        self.started_at = clock()
        self.last_commit_at: float | None = None
        # When the oldest work not committed yet was read (None: nothing waits).
        self.waiting_since: float | None = None

    # -- the engine's thread ---------------------------------------------------------------------

    def publish_counts(
        self, totals: Mapping[str, int], by_topic: Mapping[str, Mapping[str, int]] | None = None
    ) -> None:
        self.counts = Counts(
            dict(totals), {topic: dict(counts) for topic, counts in (by_topic or {}).items()}
        )

    def publish_gauges(self, gauges: Gauges) -> None:
        self.gauges = gauges

    def committed(self, latency_s: float | None) -> None:
        """A commit (a transaction, a micro-batch) finished; None: nothing needed committing."""
        if latency_s is not None:
            self._latency.observe(latency_s)
        self.last_commit_at = self._clock()

    # -- any thread ------------------------------------------------------------------------------

    def last_commit_age_s(self) -> float:
        """How long work has waited for a commit: since the last commit, or since the first of
        the waiting records was read if that is later; 0 while nothing waits."""
        waiting = self.waiting_since
        if waiting is None:
            return 0.0
        last = self.last_commit_at if self.last_commit_at is not None else self.started_at
        return max(self._clock() - max(last, waiting), 0.0)
