"""The Prometheus side: a collector that turns RunMetrics into metric families at each scrape,
and the HTTP server for /metrics, /healthz and /readyz.

Counters are exported as `hydrator_<name>_total{application_id, topic}`: one series per input
topic the engine attributes counts to, and one with `topic=""` (what no input topic accounts for,
or everything, where the engine does not attribute). Every series exists from the start, so a
counter's first increments show in `rate()`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hydrator.config import ConfigError
from hydrator.core.counters import COUNTERS
from hydrator.metrics.bounded_http import BoundedHTTPServer
from hydrator.metrics.run import Health, RunMetrics, Verdict

log = logging.getLogger(__name__)

# The classic text format: what every Prometheus version (2.x, 3.x) takes without configuration.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

GAUGES = {
    "hydrator_parked_keys": "Keys whose records wait for a key change's old image.",
    "hydrator_state_keys": "Keys in the state store.",
    "hydrator_state_bytes": "Bytes of the state store's keys and encoded states (estimate).",
    "hydrator_consumer_lag": "Records of an input partition not read yet.",
    "hydrator_last_commit_age_seconds": "How long read records have waited for a commit.",
}
HISTOGRAMS = ("hydrator_commit_latency_seconds",)


def metric_names() -> frozenset[str]:
    """Every metric name the exporter can write (histograms by their base name)."""
    counters = {f"hydrator_{spec.name}_total" for spec in COUNTERS}
    return frozenset({*counters, *GAUGES, *HISTOGRAMS})


class RunCollector(Collector):
    def __init__(self, metrics: RunMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        app = metrics.application_id
        yield from self._counters()
        gauges = metrics.gauges
        for name, value in (
            ("hydrator_parked_keys", gauges.parked_keys),
            ("hydrator_state_keys", gauges.state_keys),
            ("hydrator_state_bytes", gauges.state_bytes),
        ):
            if value is not None:
                family = GaugeMetricFamily(name, GAUGES[name], labels=["application_id"])
                family.add_metric([app], value)
                yield family
        lag = GaugeMetricFamily(
            "hydrator_consumer_lag",
            GAUGES["hydrator_consumer_lag"],
            labels=["application_id", "topic", "partition"],
        )
        for (topic, partition), records in sorted(gauges.lag.items()):
            lag.add_metric([app, topic, str(partition)], records)
        yield lag
        age = GaugeMetricFamily(
            "hydrator_last_commit_age_seconds",
            GAUGES["hydrator_last_commit_age_seconds"],
            labels=["application_id"],
        )
        age.add_metric([app], metrics.last_commit_age_s())
        yield age
        yield from metrics.commit_latency.collect()

    def _counters(self) -> Iterable[Metric]:
        metrics = self._metrics
        app = metrics.application_id
        counts = metrics.counts  # one publication for every counter
        for spec in metrics.counters:
            family = CounterMetricFamily(
                f"hydrator_{spec.name}", spec.help, labels=["application_id", "topic"]
            )
            attributed = 0
            for topic in metrics.topics:
                value = counts.by_topic.get(topic, {}).get(spec.name, 0)
                if value or spec.source == "core":
                    family.add_metric([app, topic], value)
                attributed += value
            family.add_metric([app, ""], max(counts.totals.get(spec.name, 0) - attributed, 0))
            yield family


def registry_for(metrics: RunMetrics) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(metrics))
    return registry


class MetricsServer:
    """/metrics, /healthz (alive) and /readyz (ready) on `host`:`port` (`host` "" is every
    interface; `loopback`: 127.0.0.1 only and not announced, a worker's, for its supervisor);
    503 with the reason when a health check fails. The server holds a bounded number of
    connections and threads, so idle or slow clients cannot exhaust the process
    (metrics/bounded_http.py)."""

    def __init__(
        self,
        port: int,
        registry: CollectorRegistry,
        health: Health,
        loopback: bool = False,
        host: str = "",
    ) -> None:
        handler = _handler(registry, health)
        self._loopback = loopback
        address = "127.0.0.1" if loopback else host
        try:
            self._server = BoundedHTTPServer((address, port), handler, name="metrics-http")
        except OSError as exc:
            where = f"--metrics-host {host} " if host else ""
            raise ConfigError(
                f"{where}--metrics-port {port}: cannot listen there ({exc.strerror or exc})"
            ) from None
        self.port = self._server.port
        self._host = address

    def start(self) -> None:
        self._server.start()
        if not self._loopback:
            where = f" of {self._host}" if self._host else ""
            log.info("serving /metrics, /healthz and /readyz on port %d%s", self.port, where)

    def close(self) -> None:
        self._server.close()


@contextlib.contextmanager
def serving(
    port: int | None, metrics: RunMetrics, health: Health, host: str = ""
) -> Iterator[None]:
    """Serve while the block runs; nothing when `port` is None."""
    if port is None:
        yield
        return
    server = MetricsServer(port, registry_for(metrics), health, host=host)
    server.start()
    try:
        yield
    finally:
        server.close()


def _handler(registry: CollectorRegistry, health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE)
            elif path == "/healthz":
                self._verdict(health.alive)
            elif path == "/readyz":
                self._verdict(health.ready)
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _verdict(self, check: Callable[[], Verdict]) -> None:
            try:
                verdict = check()
            except Exception as exc:  # a check that cannot answer is a failed check
                verdict = Verdict(False, f"the check failed: {type(exc).__name__}: {exc}")
            self._send(200 if verdict.ok else 503, f"{verdict.reason}\n".encode())

        def _send(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler
