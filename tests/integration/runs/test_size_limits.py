"""Size limits end to end (both engines): an oversize input, an output too large for its topic and
a record far beyond every limit all become dead letters (truncated where needed); exit code 0."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from hydrator.kafka.record_limits import HEADER_TRUNCATED, TopicLimits, record_bytes
from tests.harness.cdc_events import PLACEHOLDER, ToastTable, after_of, envelope, key_bytes
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

MB = 1024 * 1024
ENGINES = ["embedded", pytest.param("spark", id="spark")]


# An input topic that takes records larger than a broker's default limit (1 MB on Apache Kafka),
# as a topic carrying large rows is configured.
LARGE_INPUT = {"max.message.bytes": str(200 * MB)}


def produce_large(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, list]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 200 * MB})
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))

    for key, value, headers in records:
        producer.produce(
            topic, value, key, partition=0, headers=headers or None, on_delivery=delivered
        )
        producer.flush(120)
    assert producer.flush(120) == 0
    assert not failed, failed


def hydrate(
    bootstrap: str,
    app: str,
    source: str,
    output: str,
    tmp: Path,
    *extra: str,
    engine: str = "embedded",
) -> None:
    args = run_args(
        bootstrap, app, [source], tmp / "state", "--available-now", *extra, output_topic=output
    )
    if engine == "spark":
        args[args.index("embedded")] = "spark"
        args += ["--master", "local[2]"]
    done = run_to_completion(args, timeout_s=400)
    assert done.returncode == 0, done.stderr[-5000:]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_input_over_max_record_bytes_goes_to_the_dlq(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, engine: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1, LARGE_INPUT)
    table = ToastTable(doc_size=1000)
    before = [table.insert(1), table.update(1)]
    big = envelope("u", None, {"id": 1, "doc": "x" * (2 * MB), "n": 9}, 10_000, "items")
    after = [table.update(1)]
    produce_large(bootstrap, source, [*before, (key_bytes(1), big, [("trace", b"t")]), *after])

    hydrate(
        bootstrap, unique_name, source, output, tmp_path, "--max-record-bytes", "1MB", engine=engine
    )

    (dead,) = read_topic(bootstrap, f"{unique_name}-dlq")
    assert dead.value == big  # the original bytes: they fit the dead-letter topic
    assert dead.key == key_bytes(1) and dead.header("trace") == b"t"
    assert "over the" in dead.header(HEADER_ERROR).decode()
    assert dead.header(HEADER_TRUNCATED) is None
    outputs = read_topic(bootstrap, output)
    assert [after_of(o.value)[1] for o in outputs] == [
        table.expected_after[lsn] for lsn in sorted(table.expected_after)
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_output_too_large_for_its_topic_is_a_dead_letter(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, engine: str
) -> None:
    """Each input is under --max-record-bytes, but the hydrated row (three large columns, in
    `after` and in the filled `before`) is over the output topic's limit."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    col = 700 * 1024
    row = {"id": 1, "a": "a" * col, "b": "", "c": "", "n": 0}
    events = [envelope("c", None, row, 1, "wide")]
    row = {**row, "a": PLACEHOLDER, "b": "b" * col, "n": 1}
    events.append(envelope("u", None, row, 2, "wide"))
    row = {**row, "b": PLACEHOLDER, "c": "c" * col, "n": 2}
    events.append(envelope("u", None, row, 3, "wide"))  # hydrated: a+b+c in after, a+b in before
    row = {"id": 1, "a": PLACEHOLDER, "b": PLACEHOLDER, "c": PLACEHOLDER, "n": 3}
    events.append(envelope("u", None, row, 4, "wide"))  # still too large once filled
    small = {"id": 2, "a": "x", "b": "y", "c": "z", "n": 0}
    events.append(envelope("c", None, small, 5, "wide"))
    keys = [key_bytes(1)] * 4 + [key_bytes(2)]
    assert all(len(e) < MB for e in events)
    produce(bootstrap, source, [(k, e, []) for k, e in zip(keys, events, strict=True)])

    hydrate(
        bootstrap, unique_name, source, output, tmp_path, "--max-record-bytes", "1MB", engine=engine
    )

    limits = TopicLimits.for_max_record_bytes(MB)
    outputs = read_topic(bootstrap, output)
    assert sorted(after_of(o.value)[0] for o in outputs) == [1, 2, 5]
    dead = read_topic(bootstrap, f"{unique_name}-dlq")
    assert len(dead) == 2
    dead.sort(key=lambda d: d.header(HEADER_SOURCE))
    for record, lsn in zip(dead, (3, 4), strict=True):
        assert record.key == key_bytes(1)
        assert record.header(HEADER_SOURCE).decode() == f"{source}:0:{lsn - 1}"
        reason = record.header(HEADER_ERROR).decode()
        assert output in reason and str(limits.output) in reason
        assert record_bytes(record.key, record.value, record.headers) <= limits.dlq
        assert record.header(HEADER_TRUNCATED).decode().startswith("value=")
    # (event 4 is dead too: the state kept the whole row, so it is as large once filled)
    # other keys are unaffected
    assert [after_of(o.value)[1] for o in outputs if after_of(o.value)[0] == 5] == [small]


def test_engine_created_topics_carry_their_size_limits(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    produce(bootstrap, source, [ToastTable().insert(1)])
    hydrate(bootstrap, unique_name, source, output, tmp_path, "--max-record-bytes", "2MB")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [output, f"{unique_name}-handoff", f"{unique_name}-state", f"{unique_name}-dlq"]
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names])
    described = {r.name: f.result(30).get("max.message.bytes") for r, f in futures.items()}
    if not any(described.values()):
        pytest.skip("the broker does not describe topic configs (Tansu)")
    limits = TopicLimits.for_max_record_bytes(2 * MB)
    expected = [limits.output, limits.handoff, limits.changelog, limits.dlq]
    assert [int(described[n].value) for n in names] == expected


def test_outputs_to_a_topic_made_at_the_broker_s_default_limit_go_in_batches_it_takes(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """An output topic made beforehand takes records up to the broker's default (1 MB on
    Apache Kafka), less than the engine's 4 MB producer batches of incompressible rows: each
    batch must fit it (librdkafka does not split a batch the broker refuses)."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, output, 1)
    rows = [{"id": i, "doc": base64.b64encode(os.urandom(15_000)).decode()} for i in range(300)]
    events = [envelope("c", None, row, i + 1, "items") for i, row in enumerate(rows)]
    produce(
        bootstrap, source, [(key_bytes(r["id"]), e, []) for r, e in zip(rows, events, strict=True)]
    )

    hydrate(bootstrap, unique_name, source, output, tmp_path)

    assert sorted(after_of(o.value)[0] for o in read_topic(bootstrap, output)) == list(
        range(1, 301)
    )
    assert read_topic(bootstrap, f"{unique_name}-dlq") == []


def test_a_record_far_over_every_limit_is_a_truncated_dead_letter(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A 70 MB value once crash-looped the engine (MSG_SIZE_TOO_LARGE writing its dead letter)."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1, LARGE_INPUT)
    table = ToastTable(doc_size=500)
    huge = envelope("u", None, {"id": 1, "doc": "h" * (70 * MB), "n": 1}, 10_000, "items")
    produce_large(
        bootstrap,
        source,
        [table.insert(1), (key_bytes(1), huge, [("trace", b"kept")]), table.update(1)],
    )

    hydrate(bootstrap, unique_name, source, output, tmp_path)  # default --max-record-bytes 16MB

    (dead,) = read_topic(bootstrap, f"{unique_name}-dlq", timeout_s=120)
    limits = TopicLimits.for_max_record_bytes(16 * MB)
    assert dead.key == key_bytes(1)
    assert dead.header("trace") == b"kept"
    assert dead.header(HEADER_SOURCE).decode() == f"{source}:0:1"
    assert "over the" in dead.header(HEADER_ERROR).decode()
    assert dead.header(HEADER_TRUNCATED) == f"value={len(huge)}".encode()
    assert huge.startswith(dead.value) and len(dead.value) < len(huge)
    assert record_bytes(dead.key, dead.value, dead.headers) <= limits.dlq
    assert len(read_topic(bootstrap, output)) == 2
