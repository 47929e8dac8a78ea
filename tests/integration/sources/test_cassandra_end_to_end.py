"""`hydrator run --format cassandra` end to end, through both engines, on the real broker: Debezium
Cassandra connector events as a three-replica cluster delivers them (every replica's copy, out of
order), keyed and partitioned by the primary key as the connector's Kafka producer places them
(murmur2), read back with read_committed and compared, record by record, with the model."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hydrator import exact
from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.kafka.partitioner import partition_for_key
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import Consumed, create_topic, produce, read_topic
from tests.support.cassandra_model import (
    CassandraTable,
    Expected,
    Key,
    deliveries,
    expected_outputs,
    random_history,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
KEYS: list[Key] = [(i, ck) for i in range(1, 16) for ck in "ab"] + [(2**63 - 1, "z")]
SPARK_TIMEOUT_S = 400


Records = list[tuple[bytes, bytes | None, list[tuple[str, bytes | None]]]]


def workload(seed: int, with_schema: bool) -> tuple[Records, list[Expected]]:
    """The records one table's topic receives, and what each must become."""
    rng = random.Random(seed)
    table = CassandraTable(with_schema, rng=random.Random(seed + 1))
    random_history(table, rng, KEYS, steps=100)
    arrivals = deliveries(table.events, rng)
    records: Records = [(event.record_key, event.value, []) for event in arrivals]
    return records, expected_outputs(arrivals, with_schema)


def engine_args(engine: str, bootstrap: str, app: str, inputs: list[str], state: Path) -> list[str]:
    args = run_args(
        bootstrap,
        app,
        inputs,
        state,
        "--format",
        "cassandra",
        "--available-now",
        output_suffix=".enriched",
    )
    if engine == "spark":
        args[args.index("embedded")] = "spark"
        args += ["--master", "local[2]"]
    return args


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_cassandra_events_hydrate_through_the_engine(
    engine: str, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topics = {False: f"{unique_name}.ks.plain", True: f"{unique_name}.ks.schemas"}
    expected: dict[str, tuple[bytes, Expected]] = {}
    for with_schema, topic in topics.items():
        create_topic(bootstrap, topic, PARTITIONS)
        records, wanted = workload(seed=31 + with_schema, with_schema=with_schema)
        placed = produce(bootstrap, topic, records)
        for (key, _, _), want, (partition, offset) in zip(records, wanted, placed, strict=True):
            assert partition == partition_for_key(key, PARTITIONS)  # as the connector places it
            expected[f"{topic}:{partition}:{offset}"] = (key, want)

    timeout = SPARK_TIMEOUT_S if engine == "spark" else 120
    args = engine_args(engine, bootstrap, unique_name, list(topics.values()), tmp_path / "state")
    done = run_to_completion(args, timeout_s=timeout)
    assert done.returncode == 0, done.stderr[-3000:]

    outputs: dict[str, Consumed] = {}
    for topic in topics.values():
        for out in read_topic(bootstrap, f"{topic}.enriched"):
            source = (out.header(HEADER_SOURCE) or b"").decode()
            if source in outputs:  # Spark writes at least once: a repeat is the same record
                assert _same(outputs[source], out), source
            outputs[source] = out
    missing, extra = expected.keys() - outputs.keys(), outputs.keys() - expected.keys()
    assert not missing and not extra, (sorted(missing), sorted(extra), done.stderr[-5000:])
    mismatches = [s for s, out in outputs.items() if not _matches(out, *expected[s], s)]
    filled = sum(bool(out.header(HEADER_FILLED)) for out in outputs.values())
    print(
        f"{engine}: {len(outputs)} events hydrated, {filled} filled, {len(mismatches)} mismatches"
    )
    assert mismatches == []
    assert filled > len(outputs) // 4  # the workload does exercise filling
    assert read_topic(bootstrap, f"{unique_name}-dlq") == []


def _matches(out: Consumed, key: bytes, want: Expected, source: str) -> bool:
    topic, partition, _ = source.rsplit(":", 2)
    return (
        (out.partition, out.key) == (int(partition), key)
        and out.topic == f"{topic}.enriched"
        and (None if out.value is None else exact.loads(out.value)) == want.document()
        and _columns(out.header(HEADER_FILLED)) == set(want.filled)
        and _columns(out.header(HEADER_UNRESOLVED)) == set(want.unresolved)
    )


def _same(first: Consumed, second: Consumed) -> bool:
    return (first.partition, first.key, first.value) == (second.partition, second.key, second.value)


def _columns(header: bytes | None) -> set[str]:
    return set() if header is None else set(header.decode().split(","))
