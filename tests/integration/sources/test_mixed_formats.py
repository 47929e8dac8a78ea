"""One run, several input topics, a different format in each: `hydrator run` with the default
`--format auto` tells every record's format from its value, through both engines over the real
broker. Each topic is filled as its source fills it (Debezium and Cassandra: murmur2 of the key,
Cassandra with replica copies arriving late; CockroachDB: FNV-1a of the key, `resolved` in every
partition, redelivered copies; YDB: null keys, placed by key range, barriers in every
partition), one topic per demo feed (hydrator/demo/feeds), and every
output, read with read_committed, must be what that format's own hydration writes: no
mismatch, nothing in the DLQ."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.demo.feeds import FEEDS, feed_for
from hydrator.demo.feeds import mismatches as feed_mismatches
from hydrator.demo.publish import publish
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import Consumed, create_topic, produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

pytestmark = pytest.mark.integration

PARTITIONS = 3
SUFFIX = ".hydrated"


@dataclass
class Input:
    topic: str
    records: int
    check: Callable[[list[Consumed]], list[str]]  # the topic's outputs -> problems


def debezium_input(bootstrap: str, topic: str) -> Input:
    table = ToastTable("items", doc_size=2500)
    records = list(table.workload(keys=30, updates_per_key=4))
    records += [table.delete(3), table.update(5)]
    placed = produce(bootstrap, topic, records)
    sources = {
        f"{topic}:{p}:{o}": value for (_, value, _), (p, o) in zip(records, placed, strict=True)
    }

    def check(outputs: list[Consumed]) -> list[str]:
        problems = []
        for out in outputs:
            source = out.header(HEADER_SOURCE).decode()
            if sources.get(source, b"") is None:
                if out.value is not None:
                    problems.append(f"{source}: a tombstone came out with a value")
                continue
            lsn, after = after_of(out.value)
            if after != table.expected_after[lsn]:
                problems.append(f"{source}: after differs from the full row")
        if sorted(o.header(HEADER_SOURCE).decode() for o in outputs) != sorted(sources):
            problems.append("the outputs are not one per input record")
        return problems

    return Input(topic, len(records), check)


def feed_input(bootstrap: str, topic_prefix: str, name: str) -> Input:
    feed = feed_for(name, seed=5)
    topic = f"{topic_prefix}.{name}"
    records = feed.records(400, PARTITIONS)
    placed = publish(
        bootstrap, topic, ((r.key, r.value, ()) for r in records), [r.partition for r in records]
    )
    expected = {
        f"{topic}:{where.partition}:{where.offset}": record.expected
        for record, where in zip(records, placed, strict=True)
    }
    return Input(topic, len(records), lambda outputs: feed_mismatches(outputs, expected))


def inputs(bootstrap: str, prefix: str) -> list[Input]:
    topics = [f"{prefix}.debezium", *(f"{prefix}.{name}" for name in sorted(FEEDS))]
    for topic in topics:
        create_topic(bootstrap, topic, PARTITIONS)
    made = [debezium_input(bootstrap, topics[0])]
    made += [feed_input(bootstrap, prefix, name) for name in sorted(FEEDS)]
    return made


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_one_run_hydrates_topics_of_different_formats(
    engine: str, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    made = inputs(bootstrap, unique_name)
    assert len(made) >= 2
    topics = [i.topic for i in made]
    if engine == "embedded":
        args = run_args(
            bootstrap, unique_name, topics, tmp_path, "--available-now", output_suffix=SUFFIX
        )
        done = run_to_completion(args, timeout_s=180)
    else:
        args = spark_args(bootstrap, unique_name, topics, tmp_path, "--available-now")
        done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]

    report = []
    for made_input in made:
        outputs = read_topic(bootstrap, made_input.topic + SUFFIX)
        problems = made_input.check(outputs)
        assert not problems, (made_input.topic, problems[:10])
        report.append(f"{made_input.topic}: {made_input.records} in, {len(outputs)} out")
    assert read_topic(bootstrap, f"{unique_name}-dlq") == []
    print("; ".join(report), "; 0 mismatches")
