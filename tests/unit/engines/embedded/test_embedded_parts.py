"""The embedded engine's small parts that need no broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from hydrator.engines.embedded.state_dir import StateDirectory, StateDirLocked
from hydrator.engines.embedded.timers import DeadlineIndex
from hydrator.kafka.client_config import ClientConfigError, ClientSettings, parse_properties
from hydrator.kafka.partitioner import murmur2, partition_for_key
from hydrator.topology.layout import Topology, TopologyError, output_topics
from state.codec import encode_state
from state.handoff import Handoff
from state.record import StateRecord, state_key
from state.stores.rocksdb import RocksDBStore


def _signed(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # org.apache.kafka.common.utils.UtilsTest#testMurmur2
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
    ],
)
def test_murmur2_matches_java(data: str, expected: int) -> None:
    assert _signed(murmur2(data.encode())) == expected


def test_handoff_goes_to_the_partition_of_its_route_key() -> None:
    topology = Topology("app", {"in": "out"}, 6)
    handoff = Handoff("in", '{"id":9}', '{"id":1}', None, None, "in:0:1", b'{"id": 9}')
    assert topology.handoff_partition(handoff) == partition_for_key(b'{"id": 9}', 6)
    keyless_route = Handoff("in", '{"id":9}', '{"id":1}', None, None, "in:0:1")
    assert topology.handoff_partition(keyless_route) == partition_for_key(b'{"id":9}', 6)


def test_output_topics() -> None:
    assert output_topics(["a", "b"], "o", None) == {"a": "o", "b": "o"}
    assert output_topics(["a"], None, ".x") == {"a": "a.x"}
    with pytest.raises(TopologyError, match="also an input"):
        output_topics(["a", "a.x"], None, ".x")


def test_deadline_index_returns_each_due_key_once() -> None:
    index = DeadlineIndex()
    index.set(b"a", 10)
    index.set(b"b", 5)
    index.set(b"a", 20)  # moved: the old deadline must not fire
    index.set(b"c", 7)
    index.set(b"c", None)
    assert index.next_ms() == 5
    assert index.pop_due(15) == [b"b"]
    assert index.pop_due(15) == []
    assert index.pop_due(20) == [b"a"]
    assert len(index) == 0


def test_rocksdb_store_applies_changes_with_their_offset(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "s")
    key = state_key("t", '{"id":1}')
    record = StateRecord(image={"id": 1, "doc": "x"}, pos=(3,), updated_at_ms=5)
    assert store.changelog_offset is None
    store.put(key, record)
    assert store.get(key) == record
    other = state_key("t", '{"id":2}')
    store.apply({other: encode_state(record), key: None}, 42)
    assert store.changelog_offset == 42
    assert store.get(key) is None
    assert [k for k, _ in store.items()] == [other]  # the offset is not a state record
    store.close()
    reopened = RocksDBStore(tmp_path / "s")
    assert reopened.changelog_offset == 42
    reopened.close()


def test_state_dir_lock_and_stable_process_id(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path, "app")
    first.lock()
    with pytest.raises(StateDirLocked):
        StateDirectory(tmp_path, "app").lock()
    pid = first.process_id()
    first.unlock()
    again = StateDirectory(tmp_path, "app")
    again.lock()
    assert again.process_id() == pid
    again.unlock()


def test_client_properties_by_role() -> None:
    props = parse_properties(["security.protocol=SSL", "consumer.fetch.max.bytes=1000", "a=b=c"])
    settings = ClientSettings("host:1", props)
    consumer = settings.consumer({"session.timeout.ms": 6000, "group.id": "g"})
    assert consumer["security.protocol"] == "SSL"
    assert consumer["fetch.max.bytes"] == "1000"
    assert consumer["group.id"] == "g"
    assert consumer["a"] == "b=c"
    assert "fetch.max.bytes" not in settings.producer()
    with pytest.raises(ClientConfigError, match=r"isolation\.level"):
        parse_properties(["consumer.isolation.level=read_uncommitted"])
    with pytest.raises(ClientConfigError, match="name=value"):
        parse_properties(["oops"])


def test_the_spark_data_source_hands_each_client_its_role_properties() -> None:
    from hydrator.engines.spark.kafka_options import client_config

    options = {
        "kafka.bootstrap.servers": "host:1",
        "kafka.security.protocol": "SSL",
        "kafka.linger.ms": "50",
        "kafka.consumer.fetch.wait.max.ms": "20",
        "kafka.producer.linger.ms": "2",
        "kafka.admin.socket.timeout.ms": "30000",
        "topics": "t",
    }
    assert client_config(options, "consumer") == {
        "bootstrap.servers": "host:1",
        "security.protocol": "SSL",
        "linger.ms": "50",
        "fetch.wait.max.ms": "20",
    }
    assert client_config(options, "producer")["linger.ms"] == "2"  # the role's own value wins
    admin = client_config(options, "admin")
    assert admin["socket.timeout.ms"] == "30000"
    assert not any(name.startswith(("consumer.", "producer.", "admin.")) for name in admin)


def test_the_consumer_does_not_stop_fetching_for_a_second_when_its_queue_fills() -> None:
    # librdkafka's default (1 s) left one worker waiting for records a third of its time over
    # a backlog; -X consumer.fetch.queue.backoff.ms still overrides it
    from hydrator.engines.embedded.engine import CONSUMER_DEFAULTS

    assert CONSUMER_DEFAULTS["fetch.queue.backoff.ms"] <= 50
