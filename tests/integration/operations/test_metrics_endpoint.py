"""`--metrics-port` during a real run over the broker, on both engines: /healthz and /readyz
answer, and once a known stream is processed the counters on /metrics equal the run's real
counts, as the output topics, the DLQ and the progress line show them."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hydrator.core.records import HEADER_FILLED, HEADER_UNRESOLVED
from tests.harness.cdc_events import ToastTable, key_bytes
from tests.harness.hydrator_process import HydratorProcess, run_args
from tests.harness.kafka import Broker
from tests.harness.topics import Consumed, create_topic, produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

pytestmark = pytest.mark.integration

PARTITIONS = 2
SERVING = re.compile(r"serving /metrics, /healthz and /readyz on port (\d+)")
RUN_PROGRESS = re.compile(r"hydrator\.progress: .*dead letters (\d+), records (\d+), commits")
Records = list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]


def stream(seed: int, keys: int) -> Records:
    """Inserts and placeholder updates, a delete, a key change, an event no state can fill and
    a record that is not JSON."""
    table = ToastTable(doc_size=500, seed=seed)
    records: Records = list(table.workload(keys, updates_per_key=3))
    records.append(table.delete(0))
    records += table.change_key(1, keys + 1)
    table.rows[keys + 2] = {"id": keys + 2, "doc": "never seen", "n": 0}
    records.append(table.update(keys + 2))  # its doc stays a placeholder: unresolved
    records.append((key_bytes(keys + 3), b"not json {", []))
    return records


@dataclass
class Scrape:
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    def counter(self, name: str, topic: str | None = None) -> float:
        """hydrator_<name>_total, for one topic label or summed over all."""
        return sum(
            value
            for (sample, labels), value in self.samples.items()
            if sample == f"hydrator_{name}_total"
            and (topic is None or dict(labels).get("topic") == topic)
        )

    def gauge(self, name: str, **labels: str) -> float | None:
        for (sample, found), value in self.samples.items():
            if sample == name and labels.items() <= dict(found).items():
                return value
        return None

    def lag(self) -> dict[tuple[str, str], float]:
        return {
            (dict(labels)["topic"], dict(labels)["partition"]): value
            for (sample, labels), value in self.samples.items()
            if sample == "hydrator_consumer_lag"
        }


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(port: int) -> Scrape:
    status, text = get(port, "/metrics")
    assert status == 200, text
    return Scrape(
        {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
    )


def wait_for(check, what: str, timeout_s: float, process: HydratorProcess):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        if process.process.poll() is not None:
            raise AssertionError(f"hydrator exited {process.process.returncode}:\n{process.log}")
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout_s} s; last: {last}\n{process.log[-5000:]}")


@dataclass(frozen=True)
class Expected:
    """What the output topics and the DLQ show."""

    events: Counter[str]  # per input topic
    passthrough: int
    filled_columns: Counter[str]
    unresolved_events: int
    dead_letters: int

    @classmethod
    def read(cls, bootstrap: str, inputs: list[str], suffix: str, dlq: str) -> Expected:
        events: Counter[str] = Counter()
        filled: Counter[str] = Counter()
        passthrough = unresolved = 0
        for topic in inputs:
            for out in read_topic(bootstrap, topic + suffix):
                if out.value is None:
                    passthrough += 1
                    continue
                events[topic] += 1
                filled[topic] += _columns(out, HEADER_FILLED)
                unresolved += _columns(out, HEADER_UNRESOLVED) > 0
        return cls(events, passthrough, filled, unresolved, len(read_topic(bootstrap, dlq)))


def _columns(record: Consumed, header: str) -> int:
    value = record.header(header)
    return len(value.decode().split(",")) if value else 0


def _produce_streams(bootstrap: str, inputs: list[str]) -> dict[str, Records]:
    streams = {}
    for seed, topic in enumerate(inputs):
        create_topic(bootstrap, topic, PARTITIONS)
        streams[topic] = stream(seed, keys=20 + 10 * seed)
        produce(bootstrap, topic, streams[topic])
    return streams


def _outputs_complete(bootstrap: str, inputs: list[str], suffix: str, streams: dict) -> bool:
    # every input but the one that is not JSON has its output (the Kafka tombstone too)
    return all(
        len(read_topic(bootstrap, topic + suffix)) >= len(streams[topic]) - 1 for topic in inputs
    )


def test_embedded_metrics_equal_the_run_s_real_counts(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    inputs = [f"{unique_name}.a", f"{unique_name}.b"]
    app = f"{unique_name}-app"
    streams = _produce_streams(bootstrap, inputs)
    args = run_args(
        bootstrap, app, inputs, tmp_path / "state", "--metrics-port", "0",
        output_suffix=".out",
    )  # fmt: skip
    with HydratorProcess(args, tmp_path / "engine.log") as engine:
        port = int(engine.wait_for_log(SERVING, timeout_s=60).group(1))
        assert get(port, "/healthz") == (200, "ok\n")
        # served from the start: the group has not assigned partitions yet (a group join
        # takes seconds), or it has and the engine is ready already
        status, reason = get(port, "/readyz")
        assert status == 200 or (status == 503 and reason.startswith("not ready")), reason
        wait_for(lambda: get(port, "/readyz")[0] == 200, "ready", 90, engine)
        wait_for(
            lambda: _outputs_complete(bootstrap, inputs, ".out", streams),
            "every output written",
            120,
            engine,
        )
        expected = Expected.read(bootstrap, inputs, ".out", f"{app}-dlq")
        records = sum(len(s) for s in streams.values())

        def settled() -> Scrape | None:
            seen = scrape(port)
            done = seen.counter("records") == records and seen.counter("events") == sum(
                expected.events.values()
            )
            lag = seen.lag()  # the gauges are refreshed every second: wait for a fresh one
            caught_up = set(lag) == partitions and not any(lag.values())
            return seen if done and caught_up else None

        partitions = {(t, str(p)) for t in inputs for p in range(PARTITIONS)}
        metrics = wait_for(settled, "the counters to reach the run's counts", 60, engine)
        for topic in inputs:
            assert metrics.counter("events", topic) == expected.events[topic]
            assert metrics.counter("filled_columns", topic) == expected.filled_columns[topic]
            assert metrics.counter("records", topic) == len(streams[topic])
            assert metrics.counter("handoffs_sent", topic) == 1
        assert metrics.counter("events", "") == 0  # every event is attributed to its topic
        assert metrics.counter("passthrough") == expected.passthrough == 2
        assert metrics.counter("unresolved_events") == expected.unresolved_events == 2
        assert metrics.counter("dead_letters") == expected.dead_letters == 2
        assert metrics.counter("handoffs_applied") + metrics.counter("handoffs_pending") >= 2
        commits = metrics.counter("commits")
        assert commits >= 1
        latency = metrics.gauge("hydrator_commit_latency_seconds_count", application_id=app)
        assert latency == commits
        assert metrics.gauge("hydrator_parked_keys", application_id=app) == 0
        # every key of both streams has state (the deleted one as a tombstone, the old key of
        # the key change too); the record that is not JSON has none
        keys = sum(len({k for k, _, _ in s if k is not None}) - 1 for s in streams.values())
        assert metrics.gauge("hydrator_state_keys", application_id=app) == keys
        # the live keys' states hold a 500-character column each
        assert metrics.gauge("hydrator_state_bytes", application_id=app) > (keys - 6) * 500
        assert metrics.gauge("hydrator_last_commit_age_seconds", application_id=app) == 0
        assert get(port, "/readyz") == (200, "ok\n")
        assert engine.terminate() == 0
    # the run's last progress line (with --workers, the supervisor's sum) counts the same
    dead, logged = RUN_PROGRESS.findall(engine.log)[-1]
    assert (int(dead), int(logged)) == (expected.dead_letters, records)


def test_embedded_lag_is_known_for_partitions_with_nothing_new_to_read(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A partition assigned with nothing after its committed offset hands no record over, so
    the consumer gives it no position: its lag is still known (0), not left out."""
    bootstrap = kafka_broker.bootstrap_servers
    inputs = [f"{unique_name}.a"]
    streams = _produce_streams(bootstrap, inputs)
    args = run_args(
        bootstrap, f"{unique_name}-app", inputs, tmp_path / "state", "--workers", "1",
        "--metrics-port", "0", output_suffix=".out",
    )  # fmt: skip
    with HydratorProcess(args, tmp_path / "first.log") as engine:
        wait_for(
            lambda: _outputs_complete(bootstrap, inputs, ".out", streams),
            "every output written",
            120,
            engine,
        )
        assert engine.terminate() == 0
    partitions = {(inputs[0], str(p)) for p in range(PARTITIONS)}
    with HydratorProcess(args, tmp_path / "again.log") as engine:
        port = int(engine.wait_for_log(SERVING, timeout_s=60).group(1))

        def caught_up() -> dict[tuple[str, str], float] | None:
            lag = scrape(port).lag()
            return lag if set(lag) == partitions and not any(lag.values()) else None

        wait_for(caught_up, "a lag of 0 for every partition", 60, engine)
        assert engine.terminate() == 0
    assert f"lag {inputs[0]}=0" in engine.log


def test_spark_metrics_equal_the_run_s_real_counts(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    inputs = [f"{unique_name}.a", f"{unique_name}.b"]
    app = f"{unique_name}-spark"
    streams = _produce_streams(bootstrap, inputs)
    args = spark_args(bootstrap, app, inputs, tmp_path / "state", "--metrics-port", "0")
    with HydratorProcess(args, tmp_path / "engine.log") as engine:
        port = int(engine.wait_for_log(SERVING, timeout_s=60).group(1))
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz")[0] == 503  # no micro-batch yet
        wait_for(
            lambda: _outputs_complete(bootstrap, inputs, ".hydrated", streams),
            "every output written",
            SPARK_TIMEOUT_S,
            engine,
        )
        expected = Expected.read(bootstrap, inputs, ".hydrated", f"{app}-dlq")

        def settled() -> Scrape | None:
            seen = scrape(port)
            done = seen.counter("events") == sum(expected.events.values())
            return seen if done and seen.counter("dead_letters") == expected.dead_letters else None

        metrics = wait_for(settled, "the counters to reach the run's counts", 120, engine)
        assert metrics.counter("filled_columns") == sum(expected.filled_columns.values())
        assert metrics.counter("passthrough") == expected.passthrough == 2
        assert metrics.counter("unresolved_events") == expected.unresolved_events == 2
        assert metrics.counter("dead_letters") == expected.dead_letters == 2
        assert metrics.counter("handoffs_sent") == 2
        assert metrics.gauge("hydrator_parked_keys", application_id=app) == 0
        keys = sum(len({k for k, _, _ in s if k is not None}) - 1 for s in streams.values())
        assert metrics.gauge("hydrator_state_keys", application_id=app) == keys
        state_bytes = metrics.gauge("hydrator_state_bytes", application_id=app)
        assert state_bytes > (keys - 6) * 500
        assert metrics.gauge("hydrator_commit_latency_seconds_count", application_id=app) >= 1
        assert set(metrics.lag()) == {(t, str(p)) for t in inputs for p in range(PARTITIONS)}
        assert not any(metrics.lag().values())
        wait_for(lambda: get(port, "/readyz")[0] == 200, "ready", 60, engine)
        assert get(port, "/healthz") == (200, "ok\n")
        assert engine.terminate(timeout_s=120) == 0
    totals = re.findall(r"totals: (.*)", engine.log)
    assert totals, engine.log[-3000:]
    logged = dict(re.findall(r"([a-z ]+) (-?\d+)(?:, |$)", totals[-1]))
    assert int(logged["events"]) == sum(expected.events.values())
    assert int(logged["dead letters"]) == expected.dead_letters
    assert "state bytes" not in logged and "{" not in totals[-1]  # words, as the embedded line

    # A new driver on the same checkpoint starts its gauges from the state store, which must
    # hold what the batches' reported changes added up to.
    with HydratorProcess(args, tmp_path / "restarted.log") as restarted:
        port = int(restarted.wait_for_log(SERVING, timeout_s=60).group(1))

        def started() -> Scrape | None:
            seen = scrape(port)
            return seen if seen.gauge("hydrator_state_bytes") is not None else None

        metrics = wait_for(started, "the gauges read from the checkpoint", 300, restarted)
        assert metrics.gauge("hydrator_state_bytes", application_id=app) == state_bytes
        assert metrics.gauge("hydrator_parked_keys", application_id=app) == 0
        assert metrics.counter("events") == 0  # a new driver counts from 0
        restarted.wait_for_log(r"query \S+ started", timeout_s=120)  # SIGTERM is handled
        assert restarted.terminate(timeout_s=120) == 0
