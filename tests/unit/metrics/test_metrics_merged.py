"""--metrics-port with --workers: the supervisor's one endpoint sums the workers' scrapes and
answers health for all of them (hydrator/metrics/merged.py). Workers here are real exporters on
loopback ports; the whole run against a broker is
tests/integration/operations/test_metrics_endpoint.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hydrator.metrics.exporter import MetricsServer, registry_for
from hydrator.metrics.merged import MergedCollector, MergedHealth, merge
from hydrator.metrics.run import OK, Gauges, RunMetrics, Verdict


def _worker_metrics(events_a: int, lag: dict[tuple[str, int], int], age_s: float) -> RunMetrics:
    metrics = RunMetrics("app", "embedded", ("a",), clock=lambda: 100.0)
    metrics.publish_counts({"events": events_a, "commits": 1}, {"a": {"events": events_a}})
    metrics.publish_gauges(Gauges(parked_keys=1, state_keys=10, state_bytes=1000, lag=lag))
    metrics.committed(0.02)
    metrics.waiting_since = 100.0 - age_s
    metrics.last_commit_at = 0.0
    return metrics


def _samples(metrics: list) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)

    class Fixed:
        def collect(self) -> Iterator:
            yield from metrics

    registry.register(Fixed())  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _scrape(metrics: RunMetrics) -> str:
    return generate_latest(registry_for(metrics)).decode()


def test_series_are_summed_over_the_workers_and_the_commit_age_is_the_largest() -> None:
    first = _worker_metrics(3, {("a", 0): 5}, age_s=2.0)
    second = _worker_metrics(4, {("a", 1): 7}, age_s=0.5)
    samples = _samples(merge([_scrape(first), _scrape(second)]))
    app = ("application_id", "app")
    assert samples[("hydrator_events_total", (app, ("topic", "a")))] == 7
    assert samples[("hydrator_commits_total", (app, ("topic", "")))] == 2
    assert samples[("hydrator_state_keys", (app,))] == 20
    assert samples[("hydrator_parked_keys", (app,))] == 2
    assert samples[("hydrator_consumer_lag", (app, ("partition", "0"), ("topic", "a")))] == 5
    assert samples[("hydrator_consumer_lag", (app, ("partition", "1"), ("topic", "a")))] == 7
    assert samples[("hydrator_commit_latency_seconds_count", (app,))] == 2
    assert samples[("hydrator_commit_latency_seconds_bucket", (app, ("le", "0.025")))] == 2
    assert samples[("hydrator_last_commit_age_seconds", (app,))] == 2.0


class _Health:
    def __init__(self, alive: Verdict = OK, ready: Verdict = OK) -> None:
        self._alive, self._ready = alive, ready

    def alive(self) -> Verdict:
        return self._alive

    def ready(self) -> Verdict:
        return self._ready


@pytest.fixture
def servers() -> Iterator[list[MetricsServer]]:
    started: list[MetricsServer] = []
    yield started
    for server in started:
        server.close()


def _serve(servers: list[MetricsServer], metrics: RunMetrics, health: _Health) -> int:
    server = MetricsServer(0, registry_for(metrics), health, loopback=True)
    server.start()
    servers.append(server)
    return server.port


def test_the_supervisor_scrapes_every_worker_it_knows(servers: list[MetricsServer]) -> None:
    ports = {
        0: _serve(servers, _worker_metrics(3, {}, 0), _Health()),
        1: _serve(servers, _worker_metrics(4, {}, 0), _Health()),
    }
    samples = _samples(list(MergedCollector(lambda: ports).collect()))
    assert samples[("hydrator_events_total", (("application_id", "app"), ("topic", "a")))] == 7
    # a worker that went away between the board and the scrape is left out
    gone = {**ports, 2: 1}
    samples = _samples(list(MergedCollector(lambda: gone).collect()))
    assert samples[("hydrator_events_total", (("application_id", "app"), ("topic", "a")))] == 7


def test_health_is_every_workers(servers: list[MetricsServer]) -> None:
    ready = _serve(servers, _worker_metrics(1, {}, 0), _Health())
    restoring = _serve(
        servers,
        _worker_metrics(1, {}, 0),
        _Health(ready=Verdict(False, "not ready: restoring state from the changelog")),
    )
    stuck = _serve(
        servers, _worker_metrics(1, {}, 0), _Health(alive=Verdict(False, "not alive: stuck"))
    )
    assert MergedHealth(lambda: {0: ready, 1: ready}, lambda: 2).ready() == OK
    assert MergedHealth(lambda: {0: ready, 1: restoring}, lambda: 2).ready() == Verdict(
        False, "worker 1: not ready: restoring state from the changelog"
    )
    # worker 1 is being started again: not ready, still alive
    assert MergedHealth(lambda: {0: ready}, lambda: 2).ready() == Verdict(
        False, "not ready: worker 1 is not running"
    )
    assert MergedHealth(lambda: {0: ready}, lambda: 2).alive() == OK
    assert MergedHealth(lambda: {0: ready, 1: stuck}, lambda: 2).alive() == Verdict(
        False, "worker 1: not alive: stuck"
    )
