"""The Spark engine's re-select without Spark: the group function defers what needs a re-select
(stateful.py), the stage after it completes it with one query per table (reselect.py), and the
exact columns come back to the key's state through the bootstrap topic. The database here is a
stand-in with the client's `fetch` (the real client against real Postgres:
tests/integration/cold_start/test_reselect_client.py,
tests/integration/spark/test_spark_reselect.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pytest

from hydrator.core import HydrationSettings
from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.core.reselected import HEADER_RESELECTED, HEADER_RESELECTED_CURRENT, ReselectedRow
from hydrator.core.settings import OnUnresolved, UnresolvedColumnsError
from hydrator.engines.spark import reselect as stage
from hydrator.engines.spark.kafka_sink import KafkaStreamWriter
from hydrator.engines.spark.reselect import ReselectSpec, completion, partition_settings
from hydrator.engines.spark.routing import route
from hydrator.engines.spark.stateful import (
    COUNTERS,
    PENDING_OUTPUT_SCHEMA,
    RESELECTED_SUFFIX,
    HydratorSpec,
    group_function,
)
from hydrator.reselect.client import FetchStats, Table
from hydrator.reselect.settings import ReselectSettings
from hydrator.seeding import images
from state.codec import decode_state
from state.large import LazyImage
from state.record import StateRecord
from tests.unit.engines.spark.test_spark_steps import FakeState, source_batch

TOPIC = "db.public.items"
PLACEHOLDER = "__debezium_unavailable_value"


def topology() -> Any:
    from hydrator.topology.layout import Topology

    return Topology("app", {TOPIC: "out"}, 2)


TOPOLOGY = topology()


def event(key: int, lsn: int, tx: int, doc: str, table: str = "items") -> bytes:
    after = {"id": key, "n": lsn, "doc": doc}
    source = {
        "connector": "postgresql",
        "schema": "public",
        "table": table,
        "txId": tx,
        "lsn": lsn,
        "sequence": f'["{lsn - 1}","{lsn}"]',
    }
    op = "u" if doc == PLACEHOLDER else "c"
    return orjson.dumps({"before": None, "after": after, "source": source, "op": op, "ts_ms": 0})


def row(key: int, offset: int, value: bytes, partition: int = 0) -> tuple[Any, ...]:
    return (TOPIC, partition, offset, orjson.dumps({"id": key}), value, None, 0)


class Database:
    """The client's `fetch`, over rows in memory; None for every fetch while `down`."""

    def __init__(self, rows: Mapping[int, tuple[str, int]] | None = None) -> None:
        self.rows = dict(rows or {})  # id -> (doc, xmin)
        self.down = False
        self.stats = FetchStats()
        self.queries: list[tuple[Table, list[tuple[Any, ...]]]] = []

    def fetch(
        self,
        table: Table,
        key_columns: tuple[str, ...],
        keys: Iterable[tuple[Any, ...]],
        shipped: Mapping[str, Any],
    ) -> dict[tuple[Any, ...], ReselectedRow] | None:
        keys = list(dict.fromkeys(keys))
        if self.down:
            self.stats.failures += 1
            return None
        self.stats.queries += 1
        self.queries.append((table, keys))
        found = {}
        for key in keys:
            if key[0] in self.rows:
                doc, xmin = self.rows[key[0]]
                found[key] = ReselectedRow({"doc": doc}, xmin)
        return found


class Batch:
    """One micro-batch through route, the group function (one call per group, as Spark makes)
    and the re-select stage, over the states of earlier batches."""

    def __init__(self, db: Database, settings: HydrationSettings | None = None) -> None:
        self.settings = settings or HydrationSettings()
        self.spec = HydratorSpec(self.settings)
        self.db = db
        self.states: dict[str, FakeState] = {}

    def run(self, rows: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
        (routed,) = route(self.spec, TOPOLOGY.handoff_topic, TOPOLOGY.bootstrap_topic)(
            iter([source_batch(rows)])
        )
        groups: dict[str, list[bytes]] = defaultdict(list)
        for group, record in zip(*(c.to_pylist() for c in routed.columns), strict=True):
            groups[group].append(record)
        hydrate = group_function(self.spec, TOPOLOGY, reselect=True)
        frames: list[pd.DataFrame] = []
        for group, records in groups.items():
            frame = pd.DataFrame({"group": [group] * len(records), "record": records})
            frames += hydrate((group,), iter([frame]), self.states.setdefault(group, FakeState()))
        monkeypatch.setattr(stage, "client_for", lambda *_: self.db)
        spec = ReselectSpec(ReselectSettings("dbname=x"), self.spec, TOPOLOGY, 1 << 20)
        batches = [arrow(frame) for frame in frames]
        return list(completion(spec)(iter(batches)))

    def state(self, key: int) -> StateRecord:
        value = self.states[f'{TOPIC}\x00{{"id":{key}}}'].get
        return decode_state(value[1])


def arrow(frame: pd.DataFrame) -> pa.RecordBatch:
    assert list(frame.columns) == PENDING_OUTPUT_SCHEMA.names
    types = [pa.binary(), pa.list_(pa.int64()), pa.binary()]
    arrays = [
        pa.array(frame[name].tolist(), t) for name, t in zip(frame.columns, types, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, names=list(frame.columns))


def written(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    """The records the sink writes, in order."""
    out = []
    for batch in batches:
        assert batch.schema.names == ["records", "counts"]
        for topic, value, key, partition, headers, _ in KafkaStreamWriter._packed_rows(batch):
            fields = {"topic": topic, "partition": partition, "key": key, "value": value}
            out.append({**fields, "headers": dict(headers or [])})
    return out


def counted(batches: list[pa.RecordBatch]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for batch in batches:
        for counts in batch.column("counts").to_pylist():
            if counts is not None:
                for name, n in zip(COUNTERS, counts, strict=False):
                    total[name] += n
    return total


def outputs(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [r for r in written(batches) if r["topic"] == "out"]


def doc_of(record: dict[str, Any]) -> Any:
    return orjson.loads(record["value"])["after"]["doc"]


def test_an_empty_state_is_filled_by_one_query_exact_where_the_row_is_the_event_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Database({1: ("one", 501), 2: ("two", 999), 3: ("three", 503)})
    batch = Batch(db)
    rows = [
        row(1, 0, event(1, 10, 501, PLACEHOLDER)),
        row(2, 1, event(2, 11, 502, PLACEHOLDER)),  # the row was written since: current
        row(3, 0, event(3, 12, 503, PLACEHOLDER), partition=1),
    ]
    result = batch.run(rows, monkeypatch)
    out = {orjson.loads(r["key"])["id"]: r for r in outputs(result)}
    assert set(out) == {1, 2, 3}
    assert doc_of(out[1]) == "one" and out[1]["headers"][HEADER_RESELECTED] == b"doc"
    assert HEADER_RESELECTED_CURRENT not in out[1]["headers"]
    assert out[2]["headers"][HEADER_RESELECTED_CURRENT] == b"doc"
    assert HEADER_RESELECTED not in out[2]["headers"]
    assert all(HEADER_UNRESOLVED not in r["headers"] for r in out.values())
    assert len(db.queries) == 1 and sorted(db.queries[0][1]) == [(1,), (2,), (3,)]
    counts = counted(result)
    assert counts["reselect_queries"] == 1 and counts["events"] == 3
    assert counts["reselected_columns_exact"] == 2 and counts["reselected_columns_current"] == 1
    assert counts["unresolved_events"] == 0
    # the exact ones go to the key's state through the bootstrap topic, keyed apart
    seeds = [r for r in written(result) if r["topic"] == TOPOLOGY.bootstrap_topic]
    assert sorted(r["key"] for r in seeds) == sorted(
        f'{TOPIC}\x00{{"id":{k}}}{RESELECTED_SUFFIX}'.encode() for k in (1, 3)
    )
    # meanwhile the state is the one the events leave without a re-select
    assert "doc" not in (batch.state(1).image or {})


def test_the_exact_columns_reach_the_state_and_fill_the_next_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Database({1: ("one", 501)})
    batch = Batch(db)
    first = batch.run([row(1, 0, event(1, 10, 501, PLACEHOLDER))], monkeypatch)
    (seed,) = [r for r in written(first) if r["topic"] == TOPOLOGY.bootstrap_topic]
    db.down = True  # the next event needs no query: the state has it
    seed_row = (TOPOLOGY.bootstrap_topic, 0, 0, seed["key"], seed["value"], None, 0)
    second = batch.run([seed_row, row(1, 1, event(1, 11, 502, PLACEHOLDER))], monkeypatch)
    (out,) = outputs(second)
    assert doc_of(out) == "one" and out["headers"][HEADER_FILLED] == b"doc"
    assert not db.stats.failures and len(db.queries) == 1
    assert batch.state(1).image is not None and batch.state(1).image["doc"] == "one"


def test_a_key_s_later_records_wait_behind_its_deferred_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The full row after the deferred one is written after it; a second placeholder event of
    the key is deferred too, and the row updated twice in one transaction is not exact."""
    db = Database({1: ("now", 600)})
    batch = Batch(db)
    rows = [
        row(1, 0, event(1, 10, 600, PLACEHOLDER)),
        row(1, 1, event(1, 11, 600, PLACEHOLDER)),  # same transaction
        row(1, 2, event(1, 12, 601, "full")),
        row(1, 3, event(1, 13, 602, PLACEHOLDER)),  # filled from the full row's state
    ]
    result = batch.run(rows, monkeypatch)
    out = outputs(result)
    sources = [r["headers"][HEADER_SOURCE].decode() for r in out]
    assert sources == [f"{TOPIC}:0:{i}" for i in range(4)]
    assert out[0]["headers"][HEADER_RESELECTED_CURRENT] == b"doc"
    assert out[1]["headers"][HEADER_RESELECTED] == b"doc"
    assert doc_of(out[2]) == "full" and doc_of(out[3]) == "full"
    assert out[3]["headers"][HEADER_FILLED] == b"doc"
    assert len(db.queries) == 1 and db.queries[0][1] == [(1,)]


def test_a_database_that_cannot_answer_leaves_the_columns_to_on_unresolved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = Database({1: ("one", 501)})
    db.down = True
    batch = Batch(db)
    result = batch.run(
        [row(1, 0, event(1, 10, 501, PLACEHOLDER)), row(2, 1, event(2, 11, 502, "x"))],
        monkeypatch,
    )
    out = outputs(result)
    assert len(out) == 2
    (unresolved,) = [r for r in out if HEADER_UNRESOLVED in r["headers"]]
    assert unresolved["headers"][HEADER_UNRESOLVED] == b"doc"
    counts = counted(result)
    assert counts["reselect_failures"] == 1 and counts["unresolved_events"] == 1
    assert counts["events"] == 2
    assert not [r for r in written(result) if r["topic"] == TOPOLOGY.bootstrap_topic]


def test_on_unresolved_fail_waits_for_the_re_select(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = HydrationSettings(on_unresolved=OnUnresolved.FAIL)
    batch = Batch(Database({1: ("one", 501)}), settings)
    (out,) = outputs(batch.run([row(1, 0, event(1, 10, 501, PLACEHOLDER))], monkeypatch))
    assert doc_of(out) == "one"
    batch.db.down = True
    with pytest.raises(UnresolvedColumnsError):
        batch.run([row(2, 1, event(2, 11, 502, PLACEHOLDER))], monkeypatch)


def test_the_cap_on_queries_is_shared_among_partitions() -> None:
    settings = ReselectSettings("dbname=x", max_qps=12)
    assert partition_settings(settings, 4).max_qps == 3
    assert partition_settings(ReselectSettings("dbname=x"), 4).max_qps is None


def test_reselected_columns_join_only_a_state_still_at_their_event() -> None:
    seed = StateRecord(image={"id": 1, "doc": "v"}, pos=(10,))
    at = StateRecord(image={"id": 1}, pos=(10,), unknown=("doc", "notes"))
    joined = images.with_reselected(at, seed)
    assert joined is not None and dict(joined.image or {}) == {"id": 1, "doc": "v"}
    assert joined.unknown == ("notes",)  # the column read exact is known now
    assert images.with_reselected(StateRecord(image={"id": 1}, pos=(11,)), seed) is None
    assert images.with_reselected(StateRecord(image={"id": 1, "doc": "w"}, pos=(10,)), seed) is None
    assert images.with_reselected(StateRecord(pos=(10,), deleted=True), seed) is None
    assert images.with_reselected(None, seed) is None
    lazy = LazyImage({"id": 1}, reader=None)  # type: ignore[arg-type]
    joined = images.with_reselected(StateRecord(image=lazy, pos=(10,)), seed)
    assert joined is not None and type(joined.image) is LazyImage
    assert dict(joined.image.cells) == {"id": 1, "doc": "v"}  # type: ignore[union-attr]
