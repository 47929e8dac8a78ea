"""The embedded engine's processing clock and catch-up gate (clock.py), and how a task keeps its
clock with its state."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from hydrator.core import HydrationSettings
from hydrator.engines.embedded import clock
from hydrator.engines.embedded.clock import CLOCK_KEY, CatchUp, ProcessingClock
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.task import CLOCK_CHECKPOINT_MS, Task
from hydrator.events import RawRecord
from hydrator.topology.layout import Topology
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable
from tests.support.core import debezium_hydrator
from tests.unit.engines.embedded.test_embedded_task import RecordingSink


class FakeMonotonic:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def monotonic(monkeypatch: pytest.MonkeyPatch) -> FakeMonotonic:
    fake = FakeMonotonic()
    monkeypatch.setattr(clock, "_monotonic_ms", fake)
    return fake


def test_the_clock_resumes_from_its_reading_and_counts_only_running_time(
    monotonic: FakeMonotonic,
) -> None:
    running = ProcessingClock(50_000)
    monotonic.ms += 7_000  # before the first reading (a restore, say): not counted
    assert running.now_ms() == 50_000
    monotonic.ms += 1_500
    assert running.now_ms() == 51_500


def test_without_a_reading_the_clock_starts_from_the_wall_clock(
    monotonic: FakeMonotonic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock, "wall_ms", lambda: 1_700_000_000_000)
    assert ProcessingClock(None).now_ms() == 1_700_000_000_000


@pytest.mark.parametrize("data", [None, b"", b"not a number"])
def test_an_unreadable_reading_counts_as_none(data: bytes | None) -> None:
    assert clock.decode_reading(data) is None


def test_catch_up_waits_for_every_partition_below_its_end() -> None:
    bounds = {
        ("in", 2): (0, 10),
        ("handoff", 2): (0, 5),
        ("other", 2): (0, 4),  # committed at its end
        ("empty", 2): (0, 0),  # never written
        ("expired", 2): (9, 9),  # everything removed by retention
    }
    gate = CatchUp(bounds, {"in": 3, "other": 4, "expired": 2})
    # nothing to read in the last three: done from the start
    assert {(tp.topic, tp.partition) for tp in gate.pending()} == {("in", 2), ("handoff", 2)}
    gate.advance([TopicPartition("in", 2, 10), TopicPartition("handoff", 2, -1001)])
    assert not gate.done
    gate.advance([TopicPartition("handoff", 2, 5)])
    assert gate.done
    assert CatchUp.none().done


def _task(path: Path, settings: HydrationSettings) -> tuple[Task, RecordingSink]:
    sink = RecordingSink()
    store = RocksDBStore(path)
    task = Task(
        2, debezium_hydrator(settings), store, Topology("app", {"t": "t.out"}, 4), sink, RunCounts()
    )
    return task, sink


def _commit(task: Task, checkpoint_clock: bool = False) -> bool:
    if not task.has_changes(checkpoint_clock):
        return False
    task.committed(task.changes(), 1)
    return True


def test_a_reopened_task_resumes_its_clock_so_downtime_does_not_count(
    tmp_path: Path, monotonic: FakeMonotonic
) -> None:
    settings = HydrationSettings(handoff_timeout_ms=5_000)
    task, sink = _task(tmp_path / "store", settings)
    start = task.now_ms()
    table = ToastTable()
    table.insert(5)
    *_, create = table.change_key(5, 6)
    key, value, headers = create
    task.process(RawRecord("t", 2, 0, key, value, tuple(headers)), task.now_ms())
    monotonic.ms += 1_000
    assert _commit(task)
    assert task.store.get_raw(CLOCK_KEY) == str(start + 1_000).encode()
    task.close()

    monotonic.ms += 3_600_000  # an hour down: the task's clock does not move
    task, sink = _task(tmp_path / "store", settings)
    assert task.now_ms() == start + 1_000
    assert not task.has_changes()  # the reading it resumed from is saved already
    task.fire_timers(task.now_ms())
    assert sink.outputs == [] and task.parked_count == 1
    monotonic.ms += 4_000  # five seconds of running time in all
    task.fire_timers(task.now_ms())
    assert len(sink.outputs) == 1 and task.parked_count == 0


def test_pending_timers_save_the_clock_now_and_then_even_without_changes(
    tmp_path: Path, monotonic: FakeMonotonic
) -> None:
    task, _ = _task(tmp_path / "store", HydrationSettings(tombstone_retention_ms=60_000))
    table = ToastTable()
    for offset, (key, value, headers) in enumerate([table.insert(1), table.delete(1)]):
        task.process(RawRecord("t", 2, offset, key, value, tuple(headers)), task.now_ms())
    assert _commit(task)  # the tombstone, dated, and the clock
    assert not task.has_changes()
    monotonic.ms += CLOCK_CHECKPOINT_MS - 1
    assert not task.has_changes()
    assert task.has_changes(checkpoint_clock=True)  # stopping: save it anyway
    monotonic.ms += 1
    assert task.changes() == {CLOCK_KEY: str(task.now_ms()).encode()}
    assert _commit(task)
    assert not task.has_changes(checkpoint_clock=True)


def test_a_task_without_timers_writes_no_clock_on_its_own(
    tmp_path: Path, monotonic: FakeMonotonic
) -> None:
    task, _ = _task(tmp_path / "store", HydrationSettings())
    table = ToastTable()
    key, value, headers = table.insert(1)
    task.process(RawRecord("t", 2, 0, key, value, tuple(headers)), task.now_ms())
    assert _commit(task)
    monotonic.ms += 10 * CLOCK_CHECKPOINT_MS
    assert not task.has_changes(checkpoint_clock=True)


def test_repair_leaves_the_clock_reading_alone(tmp_path: Path) -> None:
    task, _ = _task(tmp_path / "store", HydrationSettings())
    task.repair([CLOCK_KEY, b"t\x00k"])
    assert list(task.dirty) == [b"t\x00k"]
