"""A Debezium patch stream end to end: `hydrator run --format debezium --fill-absent` through
both engines over the real broker, partitioned as Kafka Connect partitions (murmur2 of the key),
the output read with read_committed and every record checked against the full images a
full-row feed would have shipped."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args
from tests.support.patch_model import PatchStream, mismatches

pytestmark = pytest.mark.integration

PARTITIONS = 3
COLUMNS = ("a", "b", "c", "doc")


def workload(seed: int, keys: int = 30, changes: int = 400) -> PatchStream:
    """Full inserts, then patches: updates of a few columns with a null, key-only or partial
    `before`, deletes, re-inserts, new columns, and redeliveries of recent events."""
    rng = random.Random(seed)
    stream = PatchStream()

    def value(column: str) -> object:
        if column == "doc":
            return "".join(rng.choices("abcdef", k=rng.randint(500, 3000)))
        return rng.choice([None, rng.randint(-(2**63), 2**63 - 1), f"v{rng.random()}"])

    for key in range(keys):
        stream.insert(key, {c: value(c) for c in COLUMNS})
    for _ in range(changes):
        live, gone = sorted(stream.rows), [k for k in range(keys) if k not in stream.rows]
        roll = rng.random()
        if roll < 0.1 and len(stream.events) > 20:
            stream.redeliver(rng.randint(1, 20))
        elif roll < 0.17 and live:
            kept = tuple(rng.sample(COLUMNS, rng.randint(0, 2)))
            stream.delete(rng.choice(live), rng.choice(["key", "partial"]), kept)
        elif roll < 0.22 and gone:
            columns = rng.sample(COLUMNS, rng.randint(1, len(COLUMNS)))
            stream.insert(rng.choice(gone), {c: value(c) for c in columns})
        elif live:
            changed = rng.sample((*COLUMNS, "added"), rng.randint(1, 2))
            before = rng.choice(["null", "key", "partial"])
            kept = tuple(rng.sample(COLUMNS, rng.randint(0, 2)))
            stream.update(rng.choice(live), {c: value(c) for c in changed}, before, kept)
    return stream


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_a_patch_stream_hydrates_into_full_rows(
    kafka_broker: Broker, tmp_path: Path, engine: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    app = f"patch-{engine}-{uuid.uuid4().hex[:6]}"
    source, output = f"{app}.items", f"{app}.items.hydrated"
    create_topic(bootstrap, source, PARTITIONS)
    stream = workload(seed=17)
    placed = produce(bootstrap, source, [event.record for event in stream.events])

    options = ["--available-now", "--format", "debezium", "--fill-absent"]
    if engine == "embedded":
        args = run_args(bootstrap, app, [source], tmp_path, *options, output_suffix=".hydrated")
        timeout_s = 120.0
    else:
        args = spark_args(bootstrap, app, [source], tmp_path, *options)
        timeout_s = SPARK_TIMEOUT_S
    done = run_to_completion(args, timeout_s=timeout_s)
    assert done.returncode == 0, done.stderr[-5000:]

    outputs = read_topic(bootstrap, output)  # read_committed
    placed_events = zip(stream.events, placed, strict=True)
    by_source = {f"{source}:{p}:{o}": event for event, (p, o) in placed_events}
    fresh = [event for event in stream.events if not event.duplicate]
    seen = {o.header(HEADER_SOURCE).decode(): o for o in outputs}
    assert len(seen) == len(outputs), "an output written twice"
    problems = [p for name, out in seen.items() for p in mismatches(by_source[name], out.value)]
    assert not [name for name in seen if by_source[name].duplicate], "a redelivery was emitted"
    assert len(outputs) == len(fresh)
    assert problems == []
    assert read_topic(bootstrap, f"{app}-dlq") == []
    print(
        f"fill-absent {engine}: {len(stream.events)} events in, "
        f"{len(stream.events) - len(fresh)} redeliveries dropped, {len(outputs)} hydrated, "
        f"{len(problems)} mismatches"
    )
