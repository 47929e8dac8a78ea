"""The real-Debezium oracle in the envelopes of issue 28 (docs/formats.md): Avro through a
schema registry (Kafka Connect's AvroConverter, the in-memory Confluent-compatible registry of
hydrator/demo/schema_registry.py), flattened rows (Debezium's ExtractNewRecordState SMT,
`add.fields=op,lsn,source.sequence`, deletes rewritten), and both together.

One Debezium run feeds every envelope from the same changes, with `ALTER TABLE ... ADD COLUMN`
and `DROP COLUMN` mid-stream (new Avro schema ids). Every hydrated record must equal the
`REPLICA IDENTITY FULL` twin's (Avro decoded with the schema its id names; a flat row with its
`__` fields aside), key changes across partitions included, through the core, the embedded
engine (`hydrator run`, as an operator runs it) and the Spark engine; Avro output keeps the
input's schema id.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest

from hydrator.core import Hydrator
from hydrator.core.records import HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.demo.schema_registry import InMemorySchemaRegistry
from hydrator.formats import FormatOptions, codec_for
from tests.harness import envelopes, oracle
from tests.harness.hydrator_process import App, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.oracle import TwinCapture, TwinTables, Workload
from tests.harness.postgres import PgDatabase
from tests.harness.topics import read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4
NAMES = ("avro", "flat", "flat-avro")
SUFFIX = ".enriched"


@pytest.fixture(scope="module")
def registry() -> Iterator[InMemorySchemaRegistry]:
    with InMemorySchemaRegistry() as running:
        yield running


def _after_add(db: PgDatabase, twins: TwinTables) -> Workload:
    """Changes once `extra` exists: some set it, most leave TOASTed columns unchanged."""
    live = envelopes.live_ids(db, twins)
    rng = random.Random(3)
    statements = [oracle.update_statement(k, {"small": rng.randrange(100)}) for k in live[:6]]
    statements += [
        oracle.Statement(
            "update", "UPDATE {table} SET extra = %s, small = small + 1 WHERE id = %s", ("x", k)
        )
        for k in live[6:9]
    ]
    statements += [
        oracle.update_statement(live[9], {}, new_key=1000),
        oracle.delete_statement(live[0]),
        oracle.insert_statement("insert", 1001, oracle.big_row(rng)),
        oracle.update_statement(1001, {"small": 5}),
    ]
    return Workload.of(*statements)


def _after_drop(db: PgDatabase, twins: TwinTables) -> Workload:
    """Changes once `label` is gone: the stored rows still hold it."""
    live = envelopes.live_ids(db, twins)
    rng = random.Random(4)
    row = {c: v for c, v in oracle.big_row(rng).items() if c != "label"}
    statements = [oracle.update_statement(k, {"small": rng.randrange(100)}) for k in live[:6]]
    statements += [
        oracle.delete_statement(live[6]),
        oracle.update_statement(live[7], {"small": 1}, new_key=1002),
        oracle.insert_statement("insert", 1003, row),
        oracle.update_statement(1003, {"small": 7}),
        oracle.delete_statement(1003),
    ]
    return Workload.of(*statements)


@pytest.fixture(scope="module")
def captures(
    debezium_jvm: None,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
    registry: InMemorySchemaRegistry,
) -> dict[str, TwinCapture]:
    phases: list[envelopes.Phase] = [
        oracle.generate_workload(seed=9, operations=100),
        "ALTER TABLE {table} ADD COLUMN extra text",
        _after_add,
        "ALTER TABLE {table} DROP COLUMN label",
        _after_drop,
    ]
    return envelopes.capture(
        postgres_module,
        kafka_broker.bootstrap_servers,
        registry.url,
        phases,
        f"env_{uuid.uuid4().hex[:6]}",
        NAMES,
        partitions=PARTITIONS,
    )


def _options(registry: InMemorySchemaRegistry) -> FormatOptions:
    return FormatOptions(schema_registry_url=registry.url)


def test_the_stream_has_key_changes_and_new_schema_ids(captures: dict[str, TwinCapture]) -> None:
    avro = captures["avro"].default
    ids = set(envelopes.schema_ids(avro).values())
    assert len(ids) >= 3, f"ADD and DROP COLUMN give new value schemas: {ids}"
    for name, capture in captures.items():
        moved = [r for r in capture.default if r.header("__debezium.newkey") is not None]
        assert len(moved) >= 3, name


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fmt", ["auto", "named"])
def test_the_core_hydrates_each_envelope_to_the_full_twin(
    captures: dict[str, TwinCapture], registry: InMemorySchemaRegistry, name: str, fmt: str
) -> None:
    capture = captures[name]
    named = "debezium-flat" if "flat" in name else "debezium"
    options = _options(registry) if "avro" in name else FormatOptions()
    hydrator = Hydrator(codec_for(named if fmt == "named" else "auto", options))
    run = oracle.hydrate_with_core(hydrator, oracle.interleaved(capture.default))
    assert not run.dead, [d.reason for d in run.dead][:5]
    assert run.counts["unresolved_events"] == 0
    hydrated = [
        oracle.Captured(capture.default_topic, 0, i, o.key, o.value, o.headers)
        for i, o in enumerate(run.emitted)
    ]
    reader = envelopes.Reader(name, registry.url)
    mismatches = envelopes.compare(reader, hydrated, capture.full)
    assert not mismatches, f"{len(mismatches)} mismatches:\n{oracle.report(mismatches)}"


def _check_engine_output(
    bootstrap: str, captures: dict[str, TwinCapture], registry: InMemorySchemaRegistry, suffix: str
) -> None:
    for name, capture in captures.items():
        enriched = oracle.consume_all(
            bootstrap, capture.default_topic + suffix, expected=len(capture.default)
        )
        by_source = {f"{r.topic}:{r.partition}:{r.offset}": r for r in capture.default}
        sources = [out.header(HEADER_SOURCE).decode() for out in enriched]
        assert sorted(set(sources)) == sorted(by_source), f"{name}: every raw record"
        input_ids = envelopes.schema_ids(capture.default)
        for out, source in zip(enriched, sources, strict=True):
            raw = by_source[source]
            assert (out.partition, out.key) == (raw.partition, raw.key), source
            assert out.header(HEADER_UNRESOLVED) is None, (
                f"{source}: unresolved {out.header(HEADER_UNRESOLVED)!r}, input headers "
                f"{[name for name, _ in raw.headers]}"
            )
            if source in input_ids:
                assert (
                    envelopes.schema_ids([out]).get(f"{out.topic}:{out.partition}:{out.offset}")
                    == input_ids[source]
                ), f"{name}: same schema id"
        reader = envelopes.Reader(name, registry.url)
        mismatches = envelopes.compare(reader, enriched, capture.full)
        assert not mismatches, f"{name}: {len(mismatches)} mismatches:\n{oracle.report(mismatches)}"


def test_the_embedded_engine_hydrates_every_envelope(
    captures: dict[str, TwinCapture], registry: InMemorySchemaRegistry, app: App
) -> None:
    """`hydrator run --format auto --schema-registry-url ...` over the three topics at once."""
    inputs = [c.default_topic for c in captures.values()]
    with_registry = ("--available-now", "--schema-registry-url", registry.url)
    args = run_args(
        app.bootstrap, app.name, inputs, app.state_dir, *with_registry, output_suffix=SUFFIX
    )
    done = run_to_completion(args, timeout_s=240)
    assert done.returncode == 0, done.stderr[-5000:]
    assert read_topic(app.bootstrap, app.dlq) == []
    _check_engine_output(app.bootstrap, captures, registry, SUFFIX)


def test_the_spark_engine_hydrates_every_envelope(
    captures: dict[str, TwinCapture], registry: InMemorySchemaRegistry, app: App
) -> None:
    from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

    inputs = [c.default_topic for c in captures.values()]
    with_registry = ("--available-now", "--schema-registry-url", registry.url)
    args = spark_args(app.bootstrap, app.name, inputs, app.state_dir, *with_registry)
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]
    try:
        _check_engine_output(app.bootstrap, captures, registry, ".hydrated")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe run's last lines:\n{done.stderr[-3000:]}") from None
