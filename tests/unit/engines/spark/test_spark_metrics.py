"""The Spark engine's side of the metrics, without Spark: the state-size changes its group
function reports, and the listener that turns progress events into metrics and health."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from hydrator.engines.spark.metrics import READY_S, SparkMetrics
from hydrator.engines.spark.stateful import COUNTERS
from tests.harness.cdc_events import ToastTable
from tests.unit.engines.spark.test_spark_steps import TOPIC, FakeState, counts_of, run


def _stored(states: dict[str, FakeState]) -> int:
    return sum(len(g.encode()) + len(s.value[1]) for g, s in states.items() if s.exists)


def test_the_reported_state_bytes_changes_add_up_to_the_state() -> None:
    states: dict[str, FakeState] = {}
    table = ToastTable(doc_size=300)
    batches = [
        [table.insert(k) for k in range(6)],
        [table.update(k, touch_doc=k % 2 == 0) for k in range(6)],
        [*table.change_key(1, 9), table.delete(2)],
    ]
    total, offset = 0, 0
    for batch in batches:
        rows = []
        for key, value, _ in batch:  # no headers: the key change is a plain delete + create
            rows.append((TOPIC, 0, offset, key, value, None, 0))
            offset += 1
        total += counts_of(run(rows, states)).get("state_bytes", 0)
        assert total == _stored(states) > 0


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def progress(counts: dict[str, int], duration_ms: int = 1500) -> Any:
    row = {name: counts.get(name, 0) for name in COUNTERS}
    source = SimpleNamespace(
        latestOffset=json.dumps({"in": {"0": 10, "1": 7}, "app-handoff": {"0": 4}}),
        endOffset=json.dumps({"in": {"0": 8, "1": 7}, "app-handoff": {"0": 1}}),
    )
    return SimpleNamespace(
        progress=SimpleNamespace(
            observedMetrics={"hydrator": row},
            stateOperators=[SimpleNamespace(numRowsTotal=12)],
            sources=[source],
            batchDuration=duration_ms,
        )
    )


def test_progress_events_become_counters_gauges_and_latency() -> None:
    clock = Clock()
    metrics = SparkMetrics("app", ["in"], clock=clock)
    metrics._spark = None  # attach() needs a session; its bookkeeping alone:
    metrics._parked, metrics._state_bytes = 2, 1000
    metrics.onQueryStarted(None)
    assert not metrics.ready().ok and "micro-batch" in metrics.ready().reason
    metrics.onQueryProgress(progress({"events": 5, "parked_keys": 1, "state_bytes": 300}))
    metrics.onQueryProgress(progress({"events": 2, "dead_letters": 1, "parked_keys": -3}))
    run = metrics.run
    assert run.counts.totals["events"] == 7 and run.counts.totals["dead_letters"] == 1
    assert "parked_keys" not in run.counts.totals and "state_bytes" not in run.counts.totals
    gauges = run.gauges
    assert (gauges.parked_keys, gauges.state_keys, gauges.state_bytes) == (0, 12, 1300)
    assert gauges.lag == {("in", 0): 2, ("in", 1): 0}  # the handoff topic is no input
    assert run._latency._sum.get() == 3.0
    assert metrics.ready().ok
    clock.now += READY_S + 1
    verdict = metrics.ready()
    assert not verdict.ok and "no micro-batch has ended" in verdict.reason
    assert run.last_commit_age_s() == READY_S + 1
    metrics.onQueryIdle(None)  # nothing to do: as good as a batch
    assert metrics.ready().ok and run.last_commit_age_s() == 0
    metrics.onQueryTerminated(None)
    assert metrics.ready().reason == "not ready: no query is running"
    assert metrics.alive().ok  # no session yet: starting
