"""The embedded engine end to end: `hydrator run --engine embedded --available-now` on a real
broker, with hand-written Debezium-shaped events."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import PLACEHOLDER, ToastTable, after_of, key_bytes
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, partition_count, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 3


def test_hydrates_every_event_and_stops(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.items.enriched"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable()
    records = list(table.workload(keys=40, updates_per_key=4))
    # A primary-key change whose old and new key live in different partitions: the old image
    # travels through the handoff topic when another process owns the new key's.
    new_key = next(k for k in range(1000, 2000) if _partition(k) != _partition(3))
    records += table.change_key(3, new_key)
    records += [table.update(new_key), table.delete(7), table.update(8)]
    placed = produce(bootstrap, source, records)

    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--available-now",
        output_suffix=".enriched",
    )
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr

    assert partition_count(bootstrap, output) == PARTITIONS
    outputs = read_topic(bootstrap, output)
    by_source = {o.header(HEADER_SOURCE).decode(): o for o in outputs}
    assert len(by_source) == len(outputs) == len(records)
    for (key, value, _), (partition, offset) in zip(records, placed, strict=True):
        out = by_source[f"{source}:{partition}:{offset}"]
        assert (out.partition, out.key) == (partition, key)
        if value is None:
            assert out.value is None  # Kafka tombstones pass through
            continue
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], f"lsn {lsn}"
    filled = [o for o in outputs if o.header(HEADER_FILLED) == b"doc"]
    assert len(filled) == sum(1 for _, v, _ in records if v and PLACEHOLDER.encode() in v)
    assert read_topic(bootstrap, f"{unique_name}-dlq") == []
    # one handoff through the handoff topic, or none when one process owned both keys'
    # partitions (a worker that joined first may have read the whole backlog alone)
    assert len(read_topic(bootstrap, f"{unique_name}-handoff")) <= 1

    # A second run finds its committed offsets and state: nothing is processed twice.
    again = run_to_completion(args)
    assert again.returncode == 0, again.stderr
    assert len(read_topic(bootstrap, output)) == len(records)


def _partition(key: int) -> int:
    return partition_for_key(key_bytes(key), PARTITIONS)


def test_output_topic_option_and_env_vars(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Options from HYDRATOR_<NAME> variables; one output topic for two inputs."""
    bootstrap = kafka_broker.bootstrap_servers
    first, second = f"{unique_name}.a", f"{unique_name}.b"
    output = f"{unique_name}.all"
    for topic in (first, second):
        create_topic(bootstrap, topic, 2)
    table_a, table_b = ToastTable("a"), ToastTable("b", seed=8)
    produce(bootstrap, first, table_a.workload(keys=5, updates_per_key=2))
    produce(bootstrap, second, table_b.workload(keys=5, updates_per_key=2))

    monkeypatch.setenv("HYDRATOR_ENGINE", "embedded")
    monkeypatch.setenv("HYDRATOR_BOOTSTRAP_SERVERS", bootstrap)
    monkeypatch.setenv("HYDRATOR_INPUT_TOPIC", f"{first},{second}")
    monkeypatch.setenv("HYDRATOR_OUTPUT_TOPIC", output)
    monkeypatch.setenv("HYDRATOR_APPLICATION_ID", unique_name)
    monkeypatch.setenv("HYDRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HYDRATOR_AVAILABLE_NOW", "true")
    done = run_to_completion(["run"])
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output)
    assert len(outputs) == 30
    for out in outputs:
        lsn, after = after_of(out.value)
        table = table_a if out.header(HEADER_SOURCE).startswith(first.encode()) else table_b
        assert after == table.expected_after[lsn]


def test_parked_create_is_released_by_the_handoff_timeout(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A CREATE waiting for a handoff that never comes; `--available-now` waits it out."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 2)
    table = ToastTable()
    table.insert(5)  # known to the table model only: the hydrator never sees key 5
    *_, create = table.change_key(5, 6)
    records = [create, table.update(6), table.update(6, touch_doc=True)]
    produce(bootstrap, source, records)

    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--available-now",
        "--handoff-timeout",
        "1s",
        output_topic=output,
    )
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output)
    # the third ships doc, but its `before` comes from an image that does not know doc: listed
    assert [o.header(HEADER_UNRESOLVED) for o in outputs] == [b"doc", b"doc", b"doc"]
    assert "doc" not in orjson.loads(outputs[2].value)["before"]
    assert [after_of(o.value)[0] for o in outputs] == sorted(table.expected_after)[-3:]


def test_on_unresolved_fail_stops_without_committing(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    table = ToastTable()
    records = [table.insert(1), table.update(1)]
    table.rows[2] = {"id": 2, "doc": "never seen", "n": 0}
    records += [table.update(2), table.update(1)]  # key 2's TOAST value is nowhere
    produce(bootstrap, source, records)

    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--available-now",
        "--on-unresolved",
        "fail",
        output_topic=output,
    )
    for _ in range(2):  # nothing was committed, so the second run meets the same record
        done = run_to_completion(args)
        assert done.returncode == 1, done.stderr
        assert "unresolved columns doc" in done.stderr
        assert read_topic(bootstrap, output) == []
