"""Each engine parses a record's value once where it routes and hydrates it in one place: the
codec's `key` and `decode` take the record's one Read. Counted as calls of the exact JSON
reader with the value's bytes, under `--format auto` (every format's samples) and under a format
whose key is the Kafka key."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from hydrator.core import Hydrator, RawRecord
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.task import Task
from hydrator.engines.spark.routing import route
from hydrator.engines.spark.stateful import HydratorSpec, group_function
from hydrator.formats import codec_for
from hydrator.topology.layout import Topology
from state.stores.rocksdb import RocksDBStore
from tests.unit.engines.embedded.test_embedded_task import RecordingSink
from tests.unit.engines.spark.test_spark_steps import FakeState, source_batch
from tests.unit.formats.test_auto_format import SAMPLE_KEYS, SAMPLES

TOPIC = "t"
TOPOLOGY = Topology("app", {TOPIC: "t.out"}, 1)
EVERY_SAMPLE = [(name, value) for name, samples in SAMPLES.items() for value in samples]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """The bytes of every exact JSON read, in order: orjson's reads, which every exact read
    begins with (a compiled caller calls `exact.loads` directly, past a patch of it)."""
    read: list[bytes] = []
    loads = orjson.loads

    def counted(raw: Any) -> Any:
        read.append(bytes(raw))
        return loads(raw)

    monkeypatch.setattr(orjson, "loads", counted)
    yield read


def sample(name: str, value: Any, offset: int = 0) -> RawRecord:
    return RawRecord(TOPIC, 0, offset, SAMPLE_KEYS[name], orjson.dumps(value))


@pytest.mark.parametrize(("name", "value"), EVERY_SAMPLE)
def test_the_embedded_task_parses_each_value_once_under_auto(
    name: str, value: Any, parses: list[bytes], tmp_path: Path
) -> None:
    sink = RecordingSink()
    store = RocksDBStore(tmp_path / "store")
    task = Task(0, Hydrator(codec_for("auto")), store, TOPOLOGY, sink, RunCounts())
    try:
        records = [sample(name, value, offset) for offset in range(2)]  # the second meets state
        for record in records:
            task.process(record, now_ms=1_000)
    finally:
        task.close()
    assert not sink.dead_letters, sink.dead_letters
    assert parses.count(records[0].value or b"") == 2  # once per record


def spark_step(records: list[RawRecord], format_name: str, parses: list[bytes]) -> list[int]:
    """One micro-batch through the Spark engine's routing and group function: how many exact
    reads of the values routing made, and how many the group function made."""
    spec = HydratorSpec(format=format_name)
    rows = [(r.topic, r.partition, r.offset, r.key, r.value, None, 0) for r in records]
    values = {r.value for r in records}

    def value_reads() -> int:
        return sum(raw in values for raw in parses)

    before = value_reads()
    (routed,) = route(spec, TOPOLOGY.handoff_topic)(iter([source_batch(rows)]))
    in_routing = value_reads() - before
    groups: dict[str, list[bytes]] = defaultdict(list)
    for group, packed in zip(*(c.to_pylist() for c in routed.columns), strict=True):
        groups[group].append(packed)
    hydrate = group_function(spec, TOPOLOGY)
    before = value_reads()
    for group, packed_records in groups.items():
        frame = pd.DataFrame({"group": [group] * len(packed_records), "record": packed_records})
        list(hydrate((group,), iter([frame]), FakeState()))
    return [in_routing, value_reads() - before]


@pytest.mark.parametrize(("name", "value"), EVERY_SAMPLE)
def test_the_spark_group_function_parses_each_value_once_under_auto(
    name: str, value: Any, parses: list[bytes]
) -> None:
    """Stateless groups route each record again, with the Read they hydrate it from. Routing
    runs in another Python worker, before the shuffle, and reads the value of its own: under
    `auto`, whose key can be in the value (YDB), there is no Kafka key to route by
    (docs/formats.md)."""
    records = [sample(name, value, offset) for offset in range(2)]
    in_routing, in_groups = spark_step(records, "auto", parses)
    assert in_groups == 2
    assert in_routing == 2


def test_under_a_format_keyed_by_the_kafka_key_spark_parses_each_value_once(
    parses: list[bytes],
) -> None:
    value = SAMPLES["debezium"][0]
    records = [sample("debezium", value, offset) for offset in range(3)]
    assert spark_step(records, "debezium", parses) == [0, 3]
