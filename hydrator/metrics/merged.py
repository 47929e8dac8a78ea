"""/metrics, /healthz and /readyz for a run whose embedded engine runs as worker processes
(--workers N): one endpoint, on --metrics-port, for the whole run.

Each worker serves its own endpoints on a free loopback port and puts the port on the run's
board (engines/embedded/workers.py); the supervisor serves --metrics-port and answers each
request from the workers' answers:

* /metrics: every worker's scrape, summed series by series (the same name and labels). Workers
  own disjoint partitions and count what they commit, so sums are the run's counts, state sizes
  and lag; `hydrator_last_commit_age_seconds` takes the largest. A worker that cannot be
  scraped at that moment (it is being started again) is left out of that scrape.
* /healthz: alive unless a worker answers that it is not (its reason, named by worker). A
  worker that does not answer at all has ended, and the supervisor starts it again.
* /readyz: ready when every worker is running and ready; else the first reason, named.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from hydrator.metrics.run import OK, Verdict

log = logging.getLogger(__name__)

# Series of which the run's value is the largest worker's, not their sum.
LARGEST = frozenset({"hydrator_last_commit_age_seconds"})
FETCH_TIMEOUT_S = 5.0

# Worker index -> the loopback port its endpoints are on (absent: not serving now).
Endpoints = Callable[[], Mapping[int, int]]


def fetch(port: int, path: str, timeout_s: float = FETCH_TIMEOUT_S) -> tuple[int, str] | None:
    """(status, body) of a GET on a worker's endpoint; None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as got:
            return got.status, got.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return None


@dataclass
class _Family:
    name: str
    documentation: str
    type: str
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


def merge(scrapes: Iterable[str]) -> list[Metric]:
    """The workers' scrapes (Prometheus text) as one: each series summed over the workers (the
    LARGEST ones: their maximum), in the order the series first appear."""
    families: dict[str, _Family] = {}
    for text in scrapes:
        for parsed in text_string_to_metric_families(text):
            family = families.setdefault(
                parsed.name, _Family(parsed.name, parsed.documentation, parsed.type)
            )
            for sample in parsed.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key not in family.samples:
                    family.samples[key] = sample.value
                elif family.name in LARGEST:
                    family.samples[key] = max(family.samples[key], sample.value)
                else:
                    family.samples[key] += sample.value
    merged = []
    for family in families.values():
        metric = Metric(family.name, family.documentation, family.type)
        for (name, labels), value in family.samples.items():
            metric.add_sample(name, dict(labels), value)
        merged.append(metric)
    return merged


class MergedCollector(Collector):
    def __init__(self, endpoints: Endpoints) -> None:
        self._endpoints = endpoints

    def collect(self) -> Iterator[Metric]:
        scrapes = []
        for worker, port in sorted(self._endpoints().items()):
            answer = fetch(port, "/metrics")
            if answer is None or answer[0] != 200:
                log.debug("worker %d left out of this scrape: %s", worker, answer)
                continue
            scrapes.append(answer[1])
        yield from merge(scrapes)


class MergedHealth:
    def __init__(self, endpoints: Endpoints, workers: Callable[[], int]) -> None:
        """`workers`: how many the run has (it may start with fewer than asked, workers.py)."""
        self._endpoints = endpoints
        self._workers = workers

    def alive(self) -> Verdict:
        for worker, port in sorted(self._endpoints().items()):
            answer = fetch(port, "/healthz")
            if answer is not None and answer[0] != 200:
                return Verdict(False, f"worker {worker}: {answer[1].strip()}")
        return OK

    def ready(self) -> Verdict:
        endpoints = self._endpoints()
        for worker in range(self._workers()):
            port = endpoints.get(worker)
            answer = fetch(port, "/readyz") if port is not None else None
            if answer is None:
                return Verdict(False, f"not ready: worker {worker} is not running")
            if answer[0] != 200:
                return Verdict(False, f"worker {worker}: {answer[1].strip()}")
        return OK
