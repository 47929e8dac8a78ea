"""The exporter: what a scrape shows for what an engine published, the HTTP endpoints, the
`--metrics-port` option, and the Grafana dashboard's metric names."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hydrator.config import ConfigError, RunConfig
from hydrator.core.counters import COUNTERS, counters_of
from hydrator.metrics.exporter import MetricsServer, metric_names, registry_for
from hydrator.metrics.run import OK, Gauges, RunMetrics, Verdict
from tests.unit.cli.run_cli import BASE, captured, invoke  # noqa: F401 - the fixture

DASHBOARDS = Path(__file__).parents[3] / "docker" / "grafana" / "dashboards"


def scrape(metrics: RunMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """sample name and labels -> value, as Prometheus would read them."""
    text = generate_latest(registry_for(metrics)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_counters_per_input_topic_and_the_rest_unattributed() -> None:
    metrics = RunMetrics("app", "embedded", ("a", "b"))
    metrics.publish_counts(
        {"events": 5, "dead_letters": 3, "commits": 2, "records": 6},
        {"a": {"events": 3, "dead_letters": 1, "records": 4}, "b": {"events": 2, "records": 2}},
    )
    samples = scrape(metrics)
    assert value(samples, "hydrator_events_total", application_id="app", topic="a") == 3
    assert value(samples, "hydrator_events_total", application_id="app", topic="b") == 2
    assert value(samples, "hydrator_events_total", application_id="app", topic="") == 0
    # a dead letter no input topic accounts for (a handoff record that cannot be read)
    assert value(samples, "hydrator_dead_letters_total", application_id="app", topic="") == 2
    assert value(samples, "hydrator_dead_letters_total", application_id="app", topic="b") == 0
    # the engine's own counters: per topic only where it attributed them
    assert value(samples, "hydrator_commits_total", application_id="app", topic="") == 2
    assert ("hydrator_commits_total", (("application_id", "app"), ("topic", "a"))) not in samples
    assert value(samples, "hydrator_records_total", application_id="app", topic="a") == 4
    # every counter of the engine is there from the start, at 0 if nothing counted it yet
    for spec in counters_of("embedded"):
        assert (
            f"hydrator_{spec.name}_total",
            (("application_id", "app"), ("topic", "")),
        ) in samples, spec.name
    assert not any(name == "hydrator_state_unreadable_total" for name, _ in samples)


def test_gauges_lag_and_commit_latency() -> None:
    clock = [10.0]
    metrics = RunMetrics("app", "spark", clock=lambda: clock[0])
    samples = scrape(metrics)
    assert not any(name == "hydrator_state_keys" for name, _ in samples)  # not known yet
    metrics.publish_gauges(Gauges(2, 40, 4096, {("t", 0): 7, ("t", 1): 0}))
    metrics.committed(0.03)
    metrics.committed(2.0)
    metrics.waiting_since = 10.0
    clock[0] = 13.5
    samples = scrape(metrics)
    assert value(samples, "hydrator_parked_keys", application_id="app") == 2
    assert value(samples, "hydrator_state_keys", application_id="app") == 40
    assert value(samples, "hydrator_state_bytes", application_id="app") == 4096
    lag = {"application_id": "app", "topic": "t"}
    assert value(samples, "hydrator_consumer_lag", **lag, partition="0") == 7
    assert value(samples, "hydrator_consumer_lag", **lag, partition="1") == 0
    assert value(samples, "hydrator_last_commit_age_seconds", application_id="app") == 3.5
    assert value(samples, "hydrator_commit_latency_seconds_count", application_id="app") == 2
    assert value(samples, "hydrator_commit_latency_seconds_sum", application_id="app") == 2.03
    bucket = {"application_id": "app", "le": "0.05"}
    assert value(samples, "hydrator_commit_latency_seconds_bucket", **bucket) == 1


def test_every_written_name_is_in_the_exporter_s_list() -> None:
    metrics = RunMetrics("app", "embedded", ("a",))
    metrics.publish_gauges(Gauges(0, 0, 0, {("a", 0): 0}))
    written = {re.sub(r"_(bucket|count|sum)$", "", name) for name, _ in scrape(metrics)}
    written |= {f"hydrator_{spec.name}_total" for spec in COUNTERS}
    assert written <= metric_names()


def test_the_grafana_dashboard_uses_only_names_the_exporter_writes() -> None:
    dashboards = sorted(DASHBOARDS.glob("*.json"))
    assert dashboards, f"no dashboard in {DASHBOARDS}"
    names = metric_names()
    used = set()
    for path in dashboards:
        for expr in _expressions(json.loads(path.read_text())):
            # a name, not a regular expression over names (hydrator_.+_total)
            for name in re.findall(r"(?<![\w\"])hydrator_[a-z0-9_]*[a-z0-9](?![\w.*+])", expr):
                used.add(re.sub(r"_(bucket|count|sum)$", "", name))
    assert used, "the dashboard queries no hydrator metric"
    assert used <= names, sorted(used - names)


def _expressions(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for v in node.values() for e in _expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in _expressions(v)]
    return []


# -- the HTTP server -------------------------------------------------------------------------------


class FakeHealth:
    def __init__(self) -> None:
        self.alive_verdict = OK
        self.ready_verdict = Verdict(False, "not ready: restoring state")

    def alive(self) -> Verdict:
        return self.alive_verdict

    def ready(self) -> Verdict:
        if self.ready_verdict is None:
            raise RuntimeError("JVM gone")
        return self.ready_verdict


def get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def test_the_server_answers_metrics_healthz_and_readyz() -> None:
    metrics = RunMetrics("app", "embedded", ("a",))
    metrics.publish_counts({"events": 4}, {"a": {"events": 4}})
    health = FakeHealth()
    server = MetricsServer(0, registry_for(metrics), health)
    server.start()
    try:
        status, content_type, body = get(server.port, "/metrics")
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        assert 'hydrator_events_total{application_id="app",topic="a"} 4.0' in body
        assert get(server.port, "/healthz")[::2] == (200, "ok\n")
        assert get(server.port, "/readyz")[::2] == (503, "not ready: restoring state\n")
        health.ready_verdict = OK
        assert get(server.port, "/readyz")[0] == 200
        health.alive_verdict = Verdict(False, "the engine's thread has not turned for 130 s")
        assert get(server.port, "/healthz")[::2] == (
            503,
            "the engine's thread has not turned for 130 s\n",
        )
        health.ready_verdict = None  # the check itself fails
        status, _, body = get(server.port, "/readyz")
        assert status == 503 and "RuntimeError: JVM gone" in body
        assert get(server.port, "/nothing")[0] == 404
    finally:
        server.close()


def test_a_port_in_use_is_a_configuration_error_naming_the_option() -> None:
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--metrics-port {port}: cannot listen"):
            MetricsServer(port, registry_for(RunMetrics("app", "embedded")), FakeHealth())


# -- the option ------------------------------------------------------------------------------------


def test_metrics_port_from_flag_env_and_config_file(
    captured: list[RunConfig],  # noqa: F811 - the fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HYDRATOR_METRICS_PORT", raising=False)
    assert invoke(BASE).exit_code == 0
    assert captured[-1].metrics_port is None  # off by default
    assert invoke([*BASE, "--metrics-port", "9400"]).exit_code == 0
    assert captured[-1].metrics_port == 9400
    assert invoke(BASE, env={"HYDRATOR_METRICS_PORT": "9401"}).exit_code == 0
    assert captured[-1].metrics_port == 9401
    file = tmp_path / "run.toml"
    file.write_text("metrics-port = 9402\n")
    assert invoke([*BASE, "--config", str(file)]).exit_code == 0
    assert captured[-1].metrics_port == 9402
    result = invoke([*BASE, "--metrics-port", "70000"])
    assert result.exit_code == 2 and "--metrics-port" in result.output
