"""The embedded engine's side of the metrics: counts that join the totals only when their batch
commits, a task's exact state size, and the answers of /healthz and /readyz."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hydrator.core import HydrationSettings
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.metrics import ALIVE_S, EmbeddedMetrics, Phase
from hydrator.engines.embedded.task import Task
from hydrator.events import RawRecord
from hydrator.metrics.run import Gauges
from hydrator.topology.layout import Topology
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable
from tests.support.core import debezium_hydrator
from tests.unit.engines.embedded.test_embedded_task import RecordingSink

# -- counts ----------------------------------------------------------------------------------------


def test_a_batch_counts_only_once_committed_and_never_when_aborted() -> None:
    counts = RunCounts()
    counts.batch("a")["events"] += 3
    counts.batch()["dead_letters"] += 1
    assert counts.totals == {} and counts.pending() == {"events": 3, "dead_letters": 1}
    counts.committed()
    assert counts.totals == {"events": 3, "dead_letters": 1}
    assert counts.by_topic == {"a": {"events": 3}}  # the unattributed part has no topic
    counts.batch("a")["events"] += 5
    counts.batch("b")["events"] += 1
    counts.discarded()  # aborted: redone from the committed offsets, counted then
    counts.committed()
    assert counts.totals == {"events": 3, "dead_letters": 1} and not counts.pending()
    counts.batch("b")["events"] += 2
    counts.committed()
    assert counts.totals["events"] == 5 and counts.by_topic["b"] == {"events": 2}


# -- state size ------------------------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "update", "delete", "change_key", "tick", "commit"]),
        st.integers(0, 7),
        st.integers(0, 7),
    ),
    max_size=50,
)


def _stored(store: RocksDBStore) -> int:
    return len(list(store.raw_items()))


@settings(max_examples=60, deadline=None)
@given(ops=OPS, cache_bytes=st.sampled_from([0, 4096, 1 << 20]))
def test_a_task_knows_its_number_of_state_keys_exactly(
    ops: list[tuple[str, int, int]], cache_bytes: int
) -> None:
    """As a full scan of the store finds them, after every commit and after reopening, whatever
    mix of inserts, updates, deletes, key changes and expiries, with and without the
    decoded-state cache."""
    rules = HydrationSettings(tombstone_retention_ms=10, handoff_timeout_ms=10)
    topology = Topology("app", {"t": "t.out"}, 1)
    with tempfile.TemporaryDirectory() as tmp:
        store = RocksDBStore(Path(tmp) / "store")
        task = Task(
            0, debezium_hydrator(rules), store, topology, RecordingSink(), RunCounts(), cache_bytes
        )
        table = ToastTable(doc_size=50)
        offset, now = 0, 1_000
        for op, key, other in ops:
            records = []
            if op == "insert" and key not in table.rows:
                records = [table.insert(key)]
            elif op == "update" and key in table.rows:
                records = [table.update(key, touch_doc=other % 2 == 0)]
            elif op == "delete" and key in table.rows:
                records = [table.delete(key)]
            elif op == "change_key" and key in table.rows and other not in table.rows:
                records = table.change_key(key, other)
            elif op == "tick":
                now += 20
                task.fire_timers(now)
            elif op == "commit":
                task.committed(task.changes(), offset)
                assert task.state_keys == _stored(store)
            for raw_key, value, headers in records:
                task.process(RawRecord("t", 0, offset, raw_key, value, tuple(headers)), now)
                offset += 1
        task.committed(task.changes(), offset)
        assert task.state_keys == _stored(store)
        assert task.state_bytes > 0  # RocksDB's estimate (a commit writes the clock at least)
        task.close()
        reopened = Task(
            0, debezium_hydrator(rules), RocksDBStore(Path(tmp) / "store"), topology,
            RecordingSink(), RunCounts(),
        )  # fmt: skip
        assert reopened.state_keys == _stored(reopened.store)
        reopened.close()


# -- health ----------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _metrics(clock: Clock, in_kafka_call: bool = False) -> EmbeddedMetrics:
    return EmbeddedMetrics("app", ("t",), 100, RunCounts(), lambda: in_kafka_call, clock=clock)


@dataclass
class _Assignment:
    """What readiness and the state gauges ask of the assignment."""

    assigned_once: bool = True
    parked: int = 0
    state_keys: int = 0
    state_bytes: int = 0


def test_ready_once_running_assigned_and_committing() -> None:
    clock = Clock()
    metrics = _metrics(clock)
    assert metrics.ready_within_s == 10.0  # 100 x 100 ms
    assert "starting" in metrics.ready().reason and not metrics.ready().ok
    metrics.enter(Phase.WAITING_FOR_BROKER)
    assert "broker" in metrics.ready().reason
    metrics.enter(Phase.RUNNING, _Assignment(assigned_once=False))  # type: ignore[arg-type]
    assert "assign" in metrics.ready().reason
    metrics.enter(Phase.RUNNING, _Assignment())  # type: ignore[arg-type]
    assert metrics.ready().ok
    metrics.enter(Phase.RESTORING)
    assert "restoring" in metrics.ready().reason
    metrics.enter(Phase.RUNNING)
    # records read at 100 s wait for a commit: fine for 10 s, not past that
    metrics.run.waiting_since = clock.now
    clock.now += 9
    assert metrics.ready().ok and metrics.run.last_commit_age_s() == 9
    clock.now += 2
    verdict = metrics.ready()
    assert not verdict.ok and "11.0 s" in verdict.reason
    metrics.committed(0.02)
    metrics.run.waiting_since = None
    assert metrics.ready().ok and metrics.run.last_commit_age_s() == 0


def test_an_idle_instance_stays_ready_and_a_new_record_does_not_age_at_once() -> None:
    clock = Clock()
    metrics = _metrics(clock)
    metrics.enter(Phase.RUNNING, _Assignment())  # type: ignore[arg-type]
    metrics.committed(0.01)
    clock.now += 3600  # nothing read for an hour: nothing waits
    assert metrics.ready().ok
    metrics.run.waiting_since = clock.now  # a record arrives
    clock.now += 0.5
    assert metrics.run.last_commit_age_s() == 0.5 and metrics.ready().ok


def test_alive_while_the_thread_turns_or_waits_in_a_kafka_call() -> None:
    clock = Clock()
    metrics = _metrics(clock)
    assert metrics.alive().ok
    clock.now += ALIVE_S + 1
    verdict = metrics.alive()
    assert not verdict.ok and "has not turned" in verdict.reason and "starting" in verdict.reason
    metrics.turned()
    assert metrics.alive().ok
    waiting = _metrics(clock, in_kafka_call=True)
    clock.now += ALIVE_S + 1
    assert waiting.alive().ok


def test_a_commit_publishes_its_state_gauges_with_its_counts() -> None:
    """A scrape after a commit never shows its counts beside the state of before it: the state
    gauges count what is committed, so they move with the counts, not a second later."""
    clock = Clock()
    metrics = _metrics(clock)
    assignment = _Assignment()
    metrics.enter(Phase.RUNNING, assignment)  # type: ignore[arg-type]
    metrics.run.publish_gauges(Gauges(state_keys=0, lag={("t", 0): 0}))
    assignment.state_keys, assignment.state_bytes, assignment.parked = 54, 4096, 1
    metrics.committed(0.01)
    gauges = metrics.run.gauges
    assert (gauges.state_keys, gauges.state_bytes, gauges.parked_keys) == (54, 4096, 1)
    assert gauges.lag == {("t", 0): 0}  # the lag stays as last read from the consumer
