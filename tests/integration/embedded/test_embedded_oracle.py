"""The oracle end to end (docs/testing.md) through the embedded engine as an operator runs it.

Real Postgres, real Debezium 3.6 serialized as Kafka Connect would, a raw topic of 4 partitions
(primary-key changes whose old and new key land in different partitions, so the old row
travels through the handoff topic when another worker owns the new key's partition);
`hydrator run --engine embedded --available-now` as a subprocess over the default-identity
twin's topics (schemas.enable true and false); its output topic read back must equal the
REPLICA IDENTITY FULL twin event by event per key.
"""

from __future__ import annotations

import uuid

import pytest

from hydrator.core.records import HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.formats.debezium import NEW_KEY_HEADER, OLD_KEY_HEADER
from tests.harness import oracle
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.oracle import TwinCapture
from tests.harness.postgres import PgDatabase
from tests.harness.topics import read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4
OPERATIONS = 200
SUFFIX = ".enriched"


@pytest.fixture(scope="module")
def captures(
    debezium_jvm: None, kafka_broker: Broker, postgres_module: PgDatabase
) -> dict[bool, TwinCapture]:
    """One Debezium run over both twins, serialized with schemas.enable true and false."""
    workload = oracle.generate_workload(seed=5, operations=OPERATIONS)
    base = f"e2e_{uuid.uuid4().hex[:6]}"
    return oracle.capture_twins_envelopes(
        postgres_module,
        kafka_broker.bootstrap_servers,
        workload,
        base,
        envelopes=(True, False),
        partitions=PARTITIONS,
    )


@pytest.fixture(scope="module")
def application(
    captures: dict[bool, TwinCapture],
    kafka_broker: Broker,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """One `hydrator run --available-now` over both envelopes' raw topics; its application id."""
    app = f"oracle-e2e-{uuid.uuid4().hex[:6]}"
    inputs = [capture.default_topic for capture in captures.values()]
    args = run_args(
        kafka_broker.bootstrap_servers,
        app,
        inputs,
        tmp_path_factory.mktemp("state"),
        "--available-now",
        output_suffix=SUFFIX,
    )
    done = run_to_completion(args, timeout_s=180)
    assert done.returncode == 0, done.stderr
    return app


@pytest.mark.parametrize("schemas", [True, False], ids=["schemas_true", "schemas_false"])
def test_key_changes_cross_partitions(captures: dict[bool, TwinCapture], schemas: bool) -> None:
    """The workload really makes the engine hand rows across partitions."""
    raw = captures[schemas].default
    deletes = {
        (oracle.canonical_key(r.key), oracle.canonical_key(r.header(NEW_KEY_HEADER))): r.partition
        for r in raw
        if r.value is not None and r.header(NEW_KEY_HEADER) is not None
    }
    creates = {
        (oracle.canonical_key(r.header(OLD_KEY_HEADER)), oracle.canonical_key(r.key)): r.partition
        for r in raw
        if r.header(OLD_KEY_HEADER) is not None
    }
    assert creates.keys() == deletes.keys()
    apart = [change for change, p in creates.items() if deletes[change] != p]
    assert len(apart) >= 3, f"{len(apart)} of {len(creates)} key changes cross partitions"


@pytest.mark.parametrize("schemas", [True, False], ids=["schemas_true", "schemas_false"])
def test_enriched_topic_equals_the_full_twin(
    captures: dict[bool, TwinCapture], application: str, kafka_broker: Broker, schemas: bool
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    capture = captures[schemas]
    enriched = oracle.consume_all(bootstrap, capture.default_topic + SUFFIX)

    # Rule 7: one output per raw record, same key bytes, same partition, no unresolved column.
    by_source = {f"{r.topic}:{r.partition}:{r.offset}": r for r in capture.default}
    sources = [out.header(HEADER_SOURCE).decode() for out in enriched]
    assert sorted(sources) == sorted(by_source), "every raw record exactly once"
    for out, source in zip(enriched, sources, strict=True):
        raw = by_source[source]
        assert (out.partition, out.key) == (raw.partition, raw.key), source
        assert out.header(HEADER_UNRESOLVED) is None, source

    hydrated = oracle.events_by_key(oracle.captured_triples(enriched))
    full = oracle.events_by_key(oracle.captured_triples(capture.full))
    mismatches = oracle.compare(hydrated, full)
    assert not mismatches, f"{len(mismatches)} mismatches:\n{oracle.report(mismatches)}"


@pytest.mark.parametrize("schemas", [True, False], ids=["schemas_true", "schemas_false"])
def test_changed_header_is_the_full_twins_difference(
    captures: dict[bool, TwinCapture], application: str, kafka_broker: Broker, schemas: bool
) -> None:
    """`hydrator.changed` of every output = the FULL twin's before/after difference."""
    capture = captures[schemas]
    enriched = oracle.consume_all(kafka_broker.bootstrap_servers, capture.default_topic + SUFFIX)
    mismatches, compared = oracle.changed_mismatches(enriched, capture.full)
    assert not mismatches, f"{len(mismatches)} mismatches:\n{oracle.report(mismatches)}"
    assert compared == sum(1 for r in capture.full if r.value is not None)


def test_nothing_dead_and_every_handoff_once(
    application: str, captures: dict[bool, TwinCapture], kafka_broker: Broker
) -> None:
    """A key change's old row reaches its new key through the handoff topic when another worker
    owns the new key's partition, else at once in the process (a worker that joined first may
    have read the whole backlog alone): at most one handoff per key change, each once."""
    bootstrap = kafka_broker.bootstrap_servers
    assert read_topic(bootstrap, f"{application}-dlq") == []
    key_changes = sum(
        1
        for capture in captures.values()
        for record in capture.default
        if record.value is not None and record.header("__debezium.newkey") is not None
    )
    assert len(read_topic(bootstrap, f"{application}-handoff")) <= key_changes
    outputs = [f"{capture.default_topic}{SUFFIX}" for capture in captures.values()]
    assert app_repeats(kafka_broker, application, outputs) == 0
