"""A schema registry that goes away mid-run (docs/formats.md, "Avro with a schema registry").

Each engine hydrates Avro records whose schema it has cached; then the registry stops and
records with a new schema id arrive (a column was added). The engine retries for
`--schema-registry-timeout`, then exits 75 for a supervisor to start it again (on Spark the
failure is raised in a Python worker and told apart at the driver); no record becomes a dead
letter for it. Started again once the registry is back, it resumes from what it committed (the
embedded engine's transaction, Spark's checkpoint) and hydrates every record; each copy of an
output (a batch the exit cut short may be written again) is identical.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.demo.schema_registry import InMemorySchemaRegistry
from hydrator.engines.embedded.watchdog import EXIT_TEMPORARY
from hydrator.formats.avro import schema_id_of
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.support import avro_model as am

pytestmark = pytest.mark.integration

P = "__debezium_unavailable_value"
KEYS = 20
FAST_GROUP = ["-X", "consumer.session.timeout.ms=3000", "-X", "consumer.heartbeat.interval.ms=500"]


@pytest.fixture
def registry() -> Iterator[InMemorySchemaRegistry]:
    with InMemorySchemaRegistry() as running:
        yield running


def _row(key: int, text: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {f["name"]: None for f in fields}
    return {**row, "id": key, "small": key, "txt": text}


def _records(
    schema: dict[str, Any], schema_id: int, key_id: int, op: str, lsn: int, text: str
) -> list[tuple[bytes, bytes, tuple[()]]]:
    fields = schema["fields"][0]["type"][1]["fields"]
    out = []
    for key in range(KEYS):
        value = {
            "before": None,
            "after": _row(key, text, fields),
            "source": {"connector": "postgresql", "lsn": lsn + key, "sequence": None},
            "op": op,
            "ts_ms": 1,
        }
        out.append(
            (am.encode(am.KEY_SCHEMA, key_id, {"id": key}), am.encode(schema, schema_id, value), ())
        )
    return out


def _engine_args(
    engine: str, bootstrap: str, app: str, topic: str, state_dir: Path, *extra: str
) -> tuple[list[str], str]:
    """`hydrator run` arguments for `engine`, and the output topic they write."""
    if engine == "spark":
        from tests.integration.spark.test_spark_engine import spark_args

        return spark_args(bootstrap, app, [topic], state_dir, *extra), f"{topic}.hydrated"
    args = run_args(
        bootstrap,
        app,
        [topic],
        state_dir,
        *extra,
        "--commit-interval",
        "50ms",
        *FAST_GROUP,
        output_suffix=".out",
    )
    return args, f"{topic}.out"


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_a_registry_outage_stops_the_run_for_a_restart_and_loses_nothing(
    kafka_broker: Broker, registry: InMemorySchemaRegistry, tmp_path: Path, engine: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"sr-outage-{engine}-{uuid.uuid4().hex[:6]}"
    app = f"{topic}-app"
    create_topic(bootstrap, topic, 2)
    key_id = registry.register(f"{topic}-key", json.dumps(am.KEY_SCHEMA))
    first_schema = am.envelope_schema()
    first_id = registry.register(f"{topic}-value", json.dumps(first_schema))
    # the column added later: its schema is registered now, read by the engine only later
    later_schema = am.envelope_schema(
        [*am.value_fields(), {"name": "extra", "type": ["null", "string"], "default": None}]
    )
    later_id = registry.register(f"{topic}-value", json.dumps(later_schema))
    produce(bootstrap, topic, _records(first_schema, first_id, key_id, "c", 100, "full text"))

    args, output = _engine_args(
        engine,
        bootstrap,
        app,
        topic,
        tmp_path / "state",
        "--schema-registry-url",
        registry.url,
        "--schema-registry-timeout",
        "4s",
    )
    run = HydratorProcess(args, tmp_path / "run.log")
    try:
        run.wait_for_log(r"records [1-9]\d*", timeout_s=300)
        registry.stop()
        # updates in the new schema: TOASTed text unchanged (the placeholder)
        produce(bootstrap, topic, _records(later_schema, later_id, key_id, "u", 1000, P))
        code = run.wait(180)
    finally:
        if run.process is not None and run.process.poll() is None:
            run.kill()
    assert code == EXIT_TEMPORARY, run.log[-3000:]
    assert "schema registry at" in run.log and "does not answer" in run.log
    assert "Error: " in run.log and "did not answer within 4 s" in run.log, run.log[-3000:]
    assert read_topic(bootstrap, f"{app}-dlq") == [], "an outage is never a dead letter"

    registry.start()  # the same port, the same schemas
    done = run_to_completion([*args, "--available-now"], timeout_s=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert read_topic(bootstrap, f"{app}-dlq") == []

    copies: dict[str, set[bytes | None]] = defaultdict(set)
    for out in read_topic(bootstrap, output):
        copies[out.header(HEADER_SOURCE).decode()].add(out.value)
    assert len(copies) == 2 * KEYS, "every input record hydrated"
    assert all(len(values) == 1 for values in copies.values()), "copies are identical"
    updates = [v for vs in copies.values() for v in vs if v and schema_id_of(v) == later_id]
    assert len(updates) == KEYS
    for value in updates:
        assert am.decode(later_schema, value)["after"]["txt"] == "full text"
