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
import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hydrator.config import ConfigError
from hydrator.core.counters import COUNTERS
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
    """/metrics, /healthz (alive) and /readyz (ready) on `port`, all interfaces (`loopback`:
    127.0.0.1 only, not announced: a worker's, for its supervisor), in daemon threads; 503 with
    the reason when a health check fails."""

    def __init__(
        self, port: int, registry: CollectorRegistry, health: Health, loopback: bool = False
    ) -> None:
        handler = _handler(registry, health)
        self._loopback = loopback
        try:
            self._server = ThreadingHTTPServer(("127.0.0.1" if loopback else "", port), handler)
        except OSError as exc:
            raise ConfigError(
                f"--metrics-port {port}: cannot listen there ({exc.strerror or exc})"
            ) from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        if not self._loopback:
            log.info("serving /metrics, /healthz and /readyz on port %d", self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def serving(port: int | None, metrics: RunMetrics, health: Health) -> Iterator[None]:
    """Serve while the block runs; nothing when `port` is None."""
    if port is None:
        yield
        return
    server = MetricsServer(port, registry_for(metrics), health)
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
