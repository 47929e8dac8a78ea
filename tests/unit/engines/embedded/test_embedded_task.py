"""A task with the real core, a real RocksDB store and a recording sink (no broker)."""

from __future__ import annotations

from pathlib import Path

import orjson

from hydrator.core import HydrationSettings
from hydrator.core.records import OutputRecord
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.local_handoffs import LocalHandoffs
from hydrator.engines.embedded.task import Task
from hydrator.events import RawRecord
from hydrator.kafka.partitioner import partition_for_key
from hydrator.topology.layout import Topology
from state.codec import encode_state
from state.handoff import Handoff
from state.large import image_bytes
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable, key_bytes
from tests.support.core import debezium_hydrator

PARTITIONS = 4


class RecordingSink:
    def __init__(self) -> None:
        self.outputs: list[tuple[str, OutputRecord]] = []
        self.dead_letters: list[OutputRecord] = []
        self.handoffs: list[tuple[int, Handoff]] = []

    def output(self, input_topic: str, record: OutputRecord) -> None:
        self.outputs.append((input_topic, record))

    def dead(self, record: OutputRecord) -> None:
        self.dead_letters.append(record)

    def handoff(self, partition: int, handoff: Handoff) -> None:
        self.handoffs.append((partition, handoff))


def _task(
    tmp_path: Path, partition: int, settings: HydrationSettings | None = None
) -> tuple[Task, RecordingSink]:
    sink = RecordingSink()
    topology = Topology("app", {"t": "t.out"}, PARTITIONS)
    store = RocksDBStore(tmp_path / f"store-{partition}")
    task = Task(partition, debezium_hydrator(settings), store, topology, sink, RunCounts())
    return task, sink


def _raw(record: tuple, offset: int, partition: int) -> RawRecord:
    key, value, headers = record
    return RawRecord("t", partition, offset, key, value, tuple(headers))


def _commit(task: Task) -> None:
    encoded = {k: encode_state(s) if s is not None else None for k, s in task.dirty.items()}
    task.committed(encoded, 1)


def test_key_change_within_one_task_skips_the_handoff_topic(tmp_path: Path) -> None:
    old = 3
    partition = partition_for_key(key_bytes(old), PARTITIONS)
    new = next(
        k for k in range(1000, 3000) if partition_for_key(key_bytes(k), PARTITIONS) == partition
    )
    task, sink = _task(tmp_path, partition)
    table = ToastTable()
    records = [table.insert(old), *table.change_key(old, new)]
    for offset, record in enumerate(records):
        task.process(_raw(record, offset, partition), now_ms=1000)
    assert sink.handoffs == []
    _, create = sink.outputs[-1]
    assert orjson.loads(create.value)["after"] == table.rows[new]
    assert task.parked_count == 0


def test_handoff_to_another_partition_goes_to_the_sink(tmp_path: Path) -> None:
    old = 3
    partition = partition_for_key(key_bytes(old), PARTITIONS)
    new = next(
        k for k in range(1000, 3000) if partition_for_key(key_bytes(k), PARTITIONS) != partition
    )
    task, sink = _task(tmp_path, partition)
    table = ToastTable()
    for offset, record in enumerate([table.insert(old), *table.change_key(old, new)[:2]]):
        task.process(_raw(record, offset, partition), now_ms=1000)
    ((target, handoff),) = sink.handoffs
    assert target == partition_for_key(key_bytes(new), PARTITIONS)
    assert handoff.image == table.rows[new] | {"id": old}


def test_a_chain_of_key_changes_across_the_tasks_of_one_process_resolves_at_once(
    tmp_path: Path,
) -> None:
    """Each hop of a chain whose keys sit in different partitions of one process is applied in
    the same batch: nothing waits for a commit and a read back of the handoff topic."""
    sink = RecordingSink()
    topology = Topology("app", {"t": "t.out"}, PARTITIONS)
    tasks: dict[int, Task] = {}
    local = LocalHandoffs(tasks)
    for p in range(PARTITIONS):
        store = RocksDBStore(tmp_path / f"store-{p}")
        tasks[p] = Task(
            p, debezium_hydrator(), store, topology, sink, RunCounts(), local_handoffs=local
        )
    table = ToastTable()
    chain, records = table.key_change_chain(6, PARTITIONS)
    # CREATEs first, as a backlog read partition by partition can deliver them: each parks.
    records.sort(key=lambda record: record[2] == [] or record[2][0][0] != "__debezium.oldkey")
    for offset, record in enumerate(records):
        p = partition_for_key(record[0], PARTITIONS)
        tasks[p].process(_raw(record, offset, p), now_ms=1000)

    assert sink.handoffs == []
    assert sum(task.parked_count for task in tasks.values()) == 0
    creates = [orjson.loads(r.value) for _, r in sink.outputs if r.value is not None]
    creates = [c for c in creates if c["op"] == "c" and c["source"]["lsn"] > 1]
    assert len(creates) == len(chain) - 1
    for create in creates:
        assert create["after"] == table.expected_after[create["source"]["lsn"]]


def test_parked_record_is_released_by_the_timer_and_survives_a_reopen(tmp_path: Path) -> None:
    settings = HydrationSettings(handoff_timeout_ms=5_000)
    partition = partition_for_key(key_bytes(6), PARTITIONS)
    task, sink = _task(tmp_path, partition, settings)
    table = ToastTable()
    table.insert(5)
    *_, create = table.change_key(5, 6)
    task.process(_raw(create, 0, partition), now_ms=1_000)
    assert task.parked_count == 1 and sink.outputs == []
    _commit(task)
    task.close()

    # A restarted task finds the parked key and its deadline in the store.
    task, sink = _task(tmp_path, partition, settings)
    assert task.parked_count == 1
    task.fire_timers(now_ms=5_999)
    assert sink.outputs == []
    task.fire_timers(now_ms=6_000)
    assert len(sink.outputs) == 1 and task.parked_count == 0


def test_a_value_filled_from_state_is_not_held_twice(tmp_path: Path) -> None:
    """The cache holds the committed image: a TOAST value an update leaves unchanged (filled
    from state, the same object) adds nothing to what the open transaction holds."""
    partition = partition_for_key(key_bytes(1), PARTITIONS)
    task, _ = _task(tmp_path, partition)
    table = ToastTable(doc_size=50_000)
    task.process(_raw(table.insert(1), 0, partition), now_ms=1000)
    task.committed(task.changes(), 1)
    task.process(_raw(table.update(1, touch_doc=False), 1, partition), now_ms=1000)
    [state] = task.dirty.values()
    assert state is not None and image_bytes(state.image) > 50_000
    assert 0 < task.held_bytes < 1_000
    task.process(_raw(table.update(1, touch_doc=True), 2, partition), now_ms=1000)
    assert task.held_bytes > 50_000


def test_an_open_transaction_holds_each_changed_key_once_however_often_it_changed(
    tmp_path: Path,
) -> None:
    partition = partition_for_key(key_bytes(1), PARTITIONS)
    task, _ = _task(tmp_path, partition)
    table = ToastTable(doc_size=5_000)
    records = [table.insert(1), *(table.update(1, touch_doc=True) for _ in range(20))]
    for offset, record in enumerate(records):
        task.process(_raw(record, offset, partition), now_ms=1000)
    # counted by the key's last image (about its row), however many outputs showed it
    [state] = task.dirty.values()
    assert state is not None and task.held_bytes == image_bytes(state.image) > 5_000
    assert task.written_bytes > 20 * 5_000  # every output went out
    task.committed(task.changes(), 1)
    assert task.held_bytes == 0
