"""The embedded task's decoded-state cache is capped by bytes, whatever the row size."""

from __future__ import annotations

from pathlib import Path

from hydrator import exact
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.task import Task
from hydrator.events import RawRecord
from hydrator.topology.layout import Topology
from state.codec import encode_state
from state.embedded.cache import ENTRY_OVERHEAD as CACHE_ENTRY_OVERHEAD
from state.large import is_store_key
from state.record import state_key
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable
from tests.support.core import debezium_hydrator
from tests.unit.engines.embedded.test_embedded_task import RecordingSink

BUDGET = 200_000


def _task(tmp_path: Path, cache_bytes: int = BUDGET) -> Task:
    store = RocksDBStore(tmp_path / "store")
    topology = Topology("app", {"t": "t.out"}, 1)
    return Task(0, debezium_hydrator(), store, topology, RecordingSink(), RunCounts(), cache_bytes)


def _insert_all(task: Task, table: ToastTable, keys: range) -> None:
    for offset, key in enumerate(keys):
        raw_key, value, headers = table.insert(key)
        task.process(RawRecord("t", 0, offset, raw_key, value, tuple(headers)), 1_000)
    task.committed(task.changes(), 1)


def test_the_cache_counts_encoded_bytes_and_stays_within_its_budget(tmp_path: Path) -> None:
    task = _task(tmp_path)
    table = ToastTable(doc_size=19_000)
    _insert_all(task, table, range(100))  # ~1.9 MB of rows through a 200 KB cache
    assert 0 < task.cache_used <= BUDGET
    cached = task._cache
    assert 5 <= len(cached) < 100
    expected = 0
    for key, (decoded, cost) in cached.items():
        # a large value counts its packed size, a state its record's
        size = len(exact.pack(decoded)[0] if is_store_key(key) else encode_state(decoded))
        assert cost == len(key) + size + CACHE_ENTRY_OVERHEAD
        expected += cost
    assert task.cache_used == expected
    # the most recently written keys are the ones kept
    assert state_key("t", '{"id":99}') in cached


def test_evicted_states_come_back_from_the_store_and_count_again(tmp_path: Path) -> None:
    task = _task(tmp_path)
    table = ToastTable(doc_size=19_000)
    _insert_all(task, table, range(100))
    key = state_key("t", '{"id":0}')
    assert key not in task._cache
    state = task.state(key)
    assert state is not None and state.image == table.rows[0]
    assert key in task._cache and task.cache_used <= BUDGET


def test_a_value_larger_than_a_quarter_of_the_budget_is_not_cached(tmp_path: Path) -> None:
    task = _task(tmp_path, cache_bytes=40_000)
    table = ToastTable(doc_size=19_000)
    _insert_all(task, table, range(1))
    key = state_key("t", '{"id":0}')
    assert list(task._cache) == [key]  # the row (kept apart from its value) is small
    assert task.state(key).image == table.rows[0]  # the value read from the store
    assert list(task._cache) == [key]


def test_a_row_larger_than_a_quarter_of_the_budget_is_not_cached(tmp_path: Path) -> None:
    task = _task(tmp_path, cache_bytes=40_000)
    task.states.log.large_value_threshold = None  # every value in the row
    table = ToastTable(doc_size=19_000)
    _insert_all(task, table, range(1))
    assert task.cache_used == 0 and not task._cache
    assert task.state(state_key("t", '{"id":0}')).image == table.rows[0]


def test_a_smaller_share_shrinks_the_cache(tmp_path: Path) -> None:
    task = _task(tmp_path)
    _insert_all(task, ToastTable(doc_size=5_000), range(100))
    task.resize_cache(BUDGET // 4)
    assert task.cache_used <= BUDGET // 4
