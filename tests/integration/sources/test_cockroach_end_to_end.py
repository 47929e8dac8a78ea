"""A CockroachDB changefeed end to end: `hydrator run --format cockroachdb` (and its alias
`cockroach`) through both engines over the real broker. The topic is filled as CockroachDB's
Kafka sink fills it: row messages placed by FNV-1a of the key bytes, `resolved` messages in every
partition, and at-least-once delivery (exact duplicates, old versions after newer ones, a
replay after a restart, a backfill). The output, read with read_committed, must hold each
version's first delivery once, with `before` = the previous full row, and nothing else."""

from __future__ import annotations

import json
import random
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.kafka.partitioner import changefeed_partition
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args
from tests.support.cockroach_model import ChangefeedModel, Message, Row, as_written

pytestmark = pytest.mark.integration

PARTITIONS = 3
REGIONS = ("eu", "us-east")


def workload(seed: int, keys: int = 24, steps: int = 260) -> ChangefeedModel:
    rng = random.Random(seed)
    model = ChangefeedModel(mvcc_timestamp=True)

    def row(pk: tuple[int, str]) -> Row:
        price = Decimal(rng.randint(-(10**8), 10**8)).scaleb(-rng.randint(0, 4))
        wide = rng.choice([rng.randint(-(2**63), 2**63 - 1), 10**30 + rng.randint(0, 9)])
        return {
            "id": str(pk[0]),
            "region": json.dumps(pk[1]),
            "qty": str(rng.choice([rng.randint(-1000, 1000), 2**63 - 1, -(2**63)])),
            "price": rng.choice(["null", str(price)]),  # DECIMAL: 12.30 stays 12.30
            "name": json.dumps(rng.choice(["Petee", "Carl", "Ernie", "Lucky ü€", 'a "q"'])),
            "doc": f'{{"n": {wide}, "d": 0.10}}',  # JSONB, numbers of any width
        }

    def pk_text(pk: tuple[int, str]) -> list[str]:
        return [str(pk[0]), json.dumps(pk[1])]

    all_keys = [(i, region) for i in range(keys // len(REGIONS)) for region in REGIONS]
    for pk in all_keys:
        model.write(pk_text(pk), row(pk), rng.choice(["wall", "same"]))
    for step in range(steps):
        roll = rng.random()
        pk = rng.choice(all_keys)
        if step == steps // 2:
            model.restart(15)
        elif step == steps // 3:
            model.add_column("added0", "true")
        elif roll < 0.55:
            model.write(pk_text(pk), row(pk), rng.choice(["wall", "logical", "same"]))
        elif roll < 0.65:
            model.write(pk_text(pk), None, rng.choice(["wall", "logical"]))
        elif roll < 0.77:
            model.duplicate(rng.randint(1, 6))
        elif roll < 0.9:
            model.stale_version(f"[{', '.join(pk_text(pk))}]", rng.randint(0, 5))
        else:
            model.resolved()
    return model


def placed_messages(model: ChangefeedModel) -> list[tuple[Message, int]]:
    """Each message with the partition CockroachDB's sink gives it (resolved: each one)."""
    placed = []
    for message in model.log:
        if message.key is None:
            placed += [(message, partition) for partition in range(PARTITIONS)]
        else:
            placed.append((message, changefeed_partition(message.key, PARTITIONS)))
    return placed


@pytest.mark.parametrize(
    ("engine", "format_name"), [("embedded", "cockroachdb"), ("spark", "cockroach")]
)
def test_a_changefeed_hydrates_each_version_once_with_its_previous_row(
    kafka_broker: Broker, tmp_path: Path, engine: str, format_name: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    app = f"crdb-{engine}-{uuid.uuid4().hex[:6]}"
    source, output = f"{app}.orders", f"{app}.orders.hydrated"
    create_topic(bootstrap, source, PARTITIONS)
    model = workload(seed=23)
    placed = placed_messages(model)
    offsets = produce(
        bootstrap,
        source,
        [(message.key, message.value, []) for message, _ in placed],
        partitions=[partition for _, partition in placed],
    )
    assert [p for p, _ in offsets] == [partition for _, partition in placed]

    options = ["--available-now", "--format", format_name]
    if engine == "embedded":
        args = run_args(bootstrap, app, [source], tmp_path, *options, output_suffix=".hydrated")
        timeout_s = 120.0
    else:
        args = spark_args(bootstrap, app, [source], tmp_path, *options)
        timeout_s = SPARK_TIMEOUT_S
    done = run_to_completion(args, timeout_s=timeout_s)
    assert done.returncode == 0, done.stderr[-5000:]

    outputs = read_topic(bootstrap, output)  # read_committed
    seen = {o.header(HEADER_SOURCE).decode(): o for o in outputs}
    assert len(seen) == len(outputs), "an output written twice"
    delivered: set[int] = set()
    hydrated = stale = passed = 0
    mismatches = []
    for (message, partition), (_, offset) in zip(placed, offsets, strict=True):
        out = seen.pop(f"{source}:{partition}:{offset}", None)
        first = message.key is not None and id(message) not in delivered
        delivered.add(id(message))
        if message.key is None:  # resolved, in every partition: passed on as it came
            passed += 1
            ok = out is not None and (out.key, out.value) == (None, message.value)
        elif first:
            hydrated += 1
            assert message.expected is not None
            ok = (
                out is not None
                and (out.partition, out.key) == (partition, message.key)
                and out.value is not None
                and as_written(out.value) == as_written(message.expected)
            )
        else:
            stale += 1
            ok = out is None
        if not ok:
            mismatches.append((partition, offset, message.value, out and out.value))
    assert not seen, f"outputs of no input: {sorted(seen)[:10]}"
    assert mismatches == [], mismatches[:5]
    assert read_topic(bootstrap, f"{app}-dlq") == []
    assert hydrated > 200 and stale > 40 and passed > 10  # the workload did what it says
    print(
        f"cockroachdb {engine}: {len(placed)} messages in, {hydrated} hydrated, {stale} stale "
        f"dropped, {passed} resolved passed on, {len(mismatches)} mismatches"
    )
