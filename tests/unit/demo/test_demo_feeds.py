"""The demo's generated feeds: every record hydrated by the core under `--format auto` comes out
as the feed expects (the integration test runs the same through a broker and the engine)."""

from __future__ import annotations

from collections import defaultdict

import orjson
import pytest

from hydrator.core import DeadLetter, Hydrator, RawRecord
from hydrator.demo import SOURCES
from hydrator.demo.feeds import FEEDS, feed_for
from hydrator.formats import codec_for
from hydrator.kafka.partitioner import partition_for_key
from tests.support.core import engine_step

PARTITIONS = 3


def test_every_feed_is_a_demo_source() -> None:
    assert set(FEEDS) <= set(SOURCES)
    assert set(SOURCES) - set(FEEDS) == {"auto", "debezium", "generated", "avro"}


@pytest.mark.parametrize("name", sorted(FEEDS))
@pytest.mark.parametrize("seed", [1, 7, 42])
def test_the_core_writes_what_each_feed_expects(name: str, seed: int) -> None:
    feed = feed_for(name, seed)
    records = feed.records(600, PARTITIONS)
    assert len(records) >= 600
    hydrator = Hydrator(codec_for("auto"))
    states: dict[tuple[int, str], object] = {}
    offsets: dict[int, int] = defaultdict(int)
    kinds = {r.kind for r in records}
    for item in records:
        partition = item.partition
        if partition is None:
            partition = partition_for_key(item.key or b"", PARTITIONS)
        record = RawRecord(feed.topic, partition, offsets[partition], item.key, item.value)
        offsets[partition] += 1
        key = hydrator.route(record)
        assert not isinstance(key, DeadLetter), key.reason
        state = states.get((partition, key)) if key is not None else None
        step = engine_step(hydrator, state, record, 0)
        if key is not None:
            states[(partition, key)] = step.state
        assert not step.dead, step.dead
        if item.expected is None:
            assert not step.emitted, item
        else:
            [out] = step.emitted
            assert orjson.loads(out.value) == orjson.loads(item.expected), item
    assert {"insert", "update", "delete"} <= kinds


@pytest.mark.parametrize("name", sorted(FEEDS))
def test_a_feed_is_the_same_for_the_same_seed(name: str) -> None:
    assert feed_for(name, 3).records(200, 2) == feed_for(name, 3).records(200, 2)


def test_a_cockroachdb_row_message_is_the_wrapped_json_the_sink_writes() -> None:
    from hydrator.demo.feeds.cockroachdb import CockroachFeed

    records = CockroachFeed(5).records(300, PARTITIONS)
    rows = [r for r in records if r.kind in ("insert", "update", "delete")]
    assert {r.kind for r in rows} == {"insert", "update", "delete"}
    for record in rows:
        assert isinstance(record.value, bytes) and isinstance(record.expected, bytes)
        message, enriched = orjson.loads(record.value), orjson.loads(record.expected)
        assert set(message) == {"after", "updated"}
        assert (message["after"] is None) == (record.kind == "delete")
        assert enriched == {**message, "before": enriched["before"]}
    resolved = [r for r in records if r.kind == "resolved"]
    assert resolved and all(r.key is None and r.value == r.expected for r in resolved)
