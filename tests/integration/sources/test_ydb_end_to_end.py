"""`hydrator run --format ydb` end to end, on both engines: YDB changefeeds (UPDATES and
NEW_IMAGE mode, two input topics) placed as YDB places them — a null Kafka key, the partition
owning the key range of the first key column — hydrated and read back with read_committed;
every record must carry the images NEW_AND_OLD_IMAGES would (tests/support/ydb_model.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hydrator import exact
from hydrator.core.records import HEADER_SOURCE
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.support.ydb_model import Rendered, YdbTable, random_history

pytestmark = pytest.mark.integration

PARTITIONS = 3
SPARK_TIMEOUT_S = 400


def changefeeds(prefix: str) -> list[YdbTable]:
    return [
        random_history(YdbTable("UPDATES", True, PARTITIONS, f"{prefix}.updates"), 3, 40, 200),
        random_history(YdbTable("NEW_IMAGE", False, PARTITIONS, f"{prefix}.images"), 4, 30, 100),
    ]


def engine_args(engine: str, bootstrap: str, app: str, inputs: list[str], state: Path) -> list:
    extra = ["--format", "ydb", "--available-now"]
    args = run_args(bootstrap, app, inputs, state, *extra, output_suffix=".enriched")
    if engine == "spark":
        args[args.index("embedded")] = "spark"
        args += ["--master", "local[2]"]
    return args


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_ydb_changefeeds_are_hydrated_with_both_images(
    engine: str, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    tables = changefeeds(unique_name)
    expected: dict[str, Rendered] = {}
    for table in tables:
        create_topic(bootstrap, table.topic, PARTITIONS)
        records = [(None, rendered.value, []) for rendered in table.log]
        partitions = [rendered.partition for rendered in table.log]
        placed = produce(bootstrap, table.topic, records, partitions=partitions)
        for rendered, (partition, offset) in zip(table.log, placed, strict=True):
            assert partition == rendered.partition
            expected[f"{table.topic}:{partition}:{offset}"] = rendered

    args = engine_args(engine, bootstrap, unique_name, [t.topic for t in tables], tmp_path)
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]

    outputs = [o for t in tables for o in read_topic(bootstrap, f"{t.topic}.enriched")]
    first: dict[str, bytes | None] = {}
    mismatches = []
    for out in outputs:
        source = out.header(HEADER_SOURCE).decode()
        rendered = expected[source]
        assert (out.key, out.partition) == (None, rendered.partition), source
        if source in first:  # Spark is at least once: a repeat is the same record again
            assert out.value == first[source], source
            continue
        first[source] = out.value
        want = exact.dumps(rendered.expected(), sort_keys=True)
        if out.value is None or exact.dumps(exact.loads(out.value), sort_keys=True) != want:
            mismatches.append((source, out.value, want))
    assert first.keys() == expected.keys(), "records missing from the output"
    assert not mismatches, mismatches[:5]
    assert read_topic(bootstrap, f"{unique_name}-dlq") == []
    barriers = sum(r.barrier for r in expected.values())
    print(
        f"ydb {engine}: {len(expected)} records ({len(expected) - barriers} changes, "
        f"{barriers} barriers) in {len(tables)} topics x {PARTITIONS} partitions, "
        f"{len(outputs)} outputs, {len(mismatches)} mismatches"
    )
