"""A state too large for the changelog topic would fail every commit (a crash-loop): the task
forgets the key instead and dead-letters what it loses, with the reason."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import orjson

from hydrator.core.records import HEADER_ERROR
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.task import CHANGELOG_HEADER_BYTES, Task
from hydrator.events import RawRecord
from hydrator.kafka.record_limits import TopicLimits
from hydrator.topology.layout import Topology
from state.large import STORE_PREFIX, is_store_key
from state.record import state_key
from state.stores.rocksdb import RocksDBStore
from tests.harness.cdc_events import ToastTable, key_bytes
from tests.support.core import debezium_hydrator
from tests.unit.engines.embedded.test_embedded_task import RecordingSink

LIMIT = 20_000 + CHANGELOG_HEADER_BYTES
TOPOLOGY = Topology("app", {"t": "t.out"}, 1, TopicLimits(10**6, 10**6, LIMIT, 10**6))


def _task(
    tmp_path: Path, large_value_threshold: int | None = None
) -> tuple[Task, RecordingSink, RunCounts]:
    """Large values are kept in the row unless asked (the row is then as large as its value)."""
    sink, counts = RecordingSink(), RunCounts()
    store = RocksDBStore(tmp_path / "store")
    task = Task(
        0,
        debezium_hydrator(),
        store,
        TOPOLOGY,
        sink,
        counts,
        large_value_threshold=large_value_threshold,
    )
    return task, sink, counts


def test_a_state_over_the_changelog_limit_is_dropped_with_a_dead_letter(tmp_path: Path) -> None:
    task, sink, counts = _task(tmp_path)
    small, large = ToastTable(doc_size=100), ToastTable(doc_size=30_000)
    for offset, (key, value, headers) in enumerate([small.insert(1), large.insert(2)]):
        task.process(RawRecord("t", 0, offset, key, value, tuple(headers)), task.now_ms())
    assert len(sink.outputs) == 2  # the outputs themselves fit their topic

    changes = task.changes()

    kept, dropped = state_key("t", '{"id":1}'), state_key("t", '{"id":2}')
    assert changes[kept] is not None
    assert changes[dropped] is None  # a tombstone: restores agree with the local store
    assert task.dirty[dropped] is None
    (dead,) = sink.dead_letters
    reason = dict(dead.headers)[HEADER_ERROR].decode()
    assert '{"id":2}' in reason and "changelog" in reason and str(LIMIT) in reason
    pending = counts.pending()
    assert pending["oversize_states"] == 1 and pending["dead_letters"] == 1
    task.committed(changes, 1)
    assert task.state(dropped) is None and task.state(kept) is not None


def test_records_parked_on_a_dropped_state_go_to_the_dlq(tmp_path: Path) -> None:
    task, sink, _ = _task(tmp_path)
    table = ToastTable(doc_size=8_000)
    table.insert(1)
    *_, create = table.change_key(1, 2)  # the CREATE of key 2 waits for key 1's handoff
    records = [create]
    records += [table.update(2, touch_doc=True) for _ in range(3)]  # parked behind it
    for offset, (key, value, headers) in enumerate(records):
        task.process(RawRecord("t", 0, offset, key, value, tuple(headers)), task.now_ms())
    assert task.parked_count == 1 and not sink.outputs

    changes = task.changes()

    assert changes[state_key("t", '{"id":2}')] is None
    parked_dead = [d for d in sink.dead_letters if d.value is not None]
    assert [d.value for d in parked_dead] == [value for _, value, _ in records]
    assert all(key == key_bytes(2) for key in (d.key for d in parked_dead))
    assert task.parked_count == 0


def test_a_large_value_kept_apart_lets_the_row_fit_but_not_one_over_the_limit(
    tmp_path: Path,
) -> None:
    task, sink, counts = _task(tmp_path, large_value_threshold=2048)
    table = ToastTable(doc_size=30_000)

    def with_doc(record: tuple[bytes, bytes, Any], doc: str) -> tuple[bytes, bytes, Any]:
        raw_key, value, headers = record
        document = orjson.loads(value)
        document["after"]["doc"] = doc
        return raw_key, orjson.dumps(document), headers

    records = [
        # values are stored as they are (RocksDB and the producer compress per block): the
        # first fits the changelog's records apart from its row, the second does not
        with_doc(table.insert(1), "a row of text, repeated " * 600),
        with_doc(table.insert(2), base64.b64encode(os.urandom(30_000)).decode()),
    ]
    for offset, (key, value, headers) in enumerate(records):
        task.process(RawRecord("t", 0, offset, key, value, tuple(headers)), task.now_ms())

    changes = task.changes()

    kept, dropped = state_key("t", '{"id":1}'), state_key("t", '{"id":2}')
    assert changes[kept] is not None and len(changes[kept]) < 1000
    values = [key for key in changes if is_store_key(key)]
    assert len(values) == 1 and values[0].startswith(STORE_PREFIX + kept)
    assert changes[dropped] is None and counts.pending()["oversize_states"] == 1
    (dead,) = sink.dead_letters
    assert '{"id":2}' in dict(dead.headers)[HEADER_ERROR].decode()
