"""A bad run undone with the tool (issue 43), on real Debezium output and Apache Kafka: a run with
the wrong --format dead-letters every event and exits 65 naming `hydrator dlq replay ...`; that
command, as printed, brings every event to the enriched topic exactly once and equal to the
source's full row (the REPLICA IDENTITY FULL twin, tests/harness/oracle.py), key changes across
partitions included; the corrected run then has nothing left to read."""

from __future__ import annotations

import uuid

import pytest

from hydrator.core.records import HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.metrics.dead_letter_ratio import EXIT_TOO_MANY_DEAD_LETTERS
from tests.harness import oracle
from tests.harness.dlq import printed_replay, sources
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.postgres import PgDatabase
from tests.harness.topics import read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4
OPERATIONS = 200
SUFFIX = ".enriched"


@pytest.fixture(scope="module")
def capture(
    debezium_jvm: None, kafka_broker: Broker, postgres_module: PgDatabase
) -> oracle.TwinCapture:
    workload = oracle.generate_workload(seed=11, operations=OPERATIONS)
    base = f"dlq_{uuid.uuid4().hex[:6]}"
    captures = oracle.capture_twins_envelopes(
        postgres_module,
        kafka_broker.bootstrap_servers,
        workload,
        base,
        envelopes=(True,),
        partitions=PARTITIONS,
    )
    return captures[True]


def test_a_wrong_format_run_replayed_reaches_the_enriched_topic_whole_and_once(
    capture: oracle.TwinCapture, kafka_broker: Broker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    app = f"dlq-e2e-{uuid.uuid4().hex[:6]}"
    run = run_args(
        bootstrap,
        app,
        [capture.default_topic],
        tmp_path_factory.mktemp("state"),
        "--available-now",
        output_suffix=SUFFIX,
    )
    raw = {f"{r.topic}:{r.partition}:{r.offset}": r for r in capture.default}

    wrong = run_to_completion([*run, "--format", "cockroachdb"], timeout_s=180)
    assert wrong.returncode == EXIT_TOO_MANY_DEAD_LETTERS, wrong.stderr
    dead = read_topic(bootstrap, f"{app}-dlq")
    assert sources(dead) == {source: 1 for source in raw}
    enriched_topic = capture.default_topic + SUFFIX
    assert read_topic(bootstrap, enriched_topic) == []

    replay = run_to_completion(printed_replay(wrong.stderr), timeout_s=300)
    assert replay.returncode == 0, replay.stderr
    enriched = oracle.consume_all(bootstrap, enriched_topic)
    got = [out.header(HEADER_SOURCE).decode() for out in enriched]
    assert sorted(got) == sorted(raw), "every raw record exactly once"
    for out, source in zip(enriched, got, strict=True):
        assert (out.partition, out.key) == (raw[source].partition, raw[source].key), source
        assert out.header(HEADER_UNRESOLVED) is None, source
    hydrated = oracle.events_by_key(oracle.captured_triples(enriched))
    full = oracle.events_by_key(oracle.captured_triples(capture.full))
    mismatches = oracle.compare(hydrated, full)
    assert not mismatches, f"{len(mismatches)} mismatches:\n{oracle.report(mismatches)}"
    assert app_repeats(kafka_broker, app, [enriched_topic]) == 0
    assert len(read_topic(bootstrap, f"{app}-dlq")) == len(dead), "nothing failed again"

    # The corrected run reads nothing: the replay did its work.
    corrected = run_to_completion([*run, "--format", "debezium"], timeout_s=180)
    assert corrected.returncode == 0, corrected.stderr
    assert "records 0," in corrected.stderr
    assert len(oracle.consume_all(bootstrap, enriched_topic)) == len(enriched)
