"""A key whose first event is a primary-key change (docs/cold-start.md), through both engines:
real Postgres, real Debezium, a stream that begins after its rows were inserted (their inserts
are gone from the topic), an empty state. The old key has no state, so the key change's handoff
carries no image.

* Without `--reselect`: every output without a mark equals the REPLICA IDENTITY FULL twin's row
  at that event; the key change's DELETE (a key-only `before` nothing can complete) and CREATE
  (its placeholders) list their columns unresolved, and so does every later event that would
  take them from the state.
* With `--reselect`: the handoff without an image is a miss like any other: every placeholder of
  a row that still exists is filled, exact columns equal the twin's at that event, nothing is
  passed off; the embedded engine queries at most once per table and batch, and fills the new
  key's later events from the state the exact values seeded.

The shapes: plain key changes, with a column changed, chained, in one transaction with an update
of the new key, followed by a rewrite of the TOAST value, after an update of the old key, followed
by a delete, and onto a key an earlier change freed (tests/harness/cold_start.py).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from hydrator.config import EmbeddedSettings, RunConfig
from hydrator.core.reselected import HEADER_RESELECTED, HEADER_RESELECTED_CURRENT
from hydrator.engines.embedded import engine as embedded_engine
from hydrator.engines.embedded import loop
from hydrator.reselect.settings import ReselectSettings
from tests.harness import oracle
from tests.harness.cold_start import (
    Paired,
    check_honest,
    key_change_workload,
    keys_alive_at_end,
    listed,
    paired_outputs,
)
from tests.harness.debezium import create_topics
from tests.harness.hydrator_process import run_to_completion
from tests.harness.kafka import Broker
from tests.harness.postgres import PgDatabase
from tests.harness.reselect import PARTITIONS, after_placeholders, headers_of, produce
from tests.integration.embedded.test_embedded_reselect import CountingReselect, config_for, run_once
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args
from tests.integration.spark.test_spark_reselect import later

pytestmark = pytest.mark.integration

OLD_KEY = "__debezium.oldkey"
NEW_KEY = "__debezium.newkey"


@pytest.fixture(scope="module")
def capture(
    debezium_jvm: None, kafka_broker: Broker, postgres_module: PgDatabase
) -> oracle.TwinCapture:
    return oracle.capture_twins(
        postgres_module,
        kafka_broker.bootstrap_servers,
        key_change_workload(),
        f"kc_{uuid.uuid4().hex[:6]}",
        partitions=PARTITIONS,
    )


def after_the_inserts(records: list[oracle.Captured]) -> list[oracle.Captured]:
    """The records after the rows' inserts (a key change's CREATE is not an insert)."""
    return [
        r
        for r in records
        if r.value is None or oracle.payload(r.value)["op"] != "c" or r.header(OLD_KEY) is not None
    ]


def late_topic(bootstrap: str, capture: oracle.TwinCapture, name: str) -> tuple[str, list]:
    topic = f"{capture.default_topic}.{name}"
    records = after_the_inserts(capture.default)
    create_topics(bootstrap, [topic], PARTITIONS)
    produce(bootstrap, topic, records)
    return topic, records


def _is_key_change(p: Paired, header: str) -> bool:
    return p.out.header(header) is not None


def check(
    capture: oracle.TwinCapture,
    topic: str,
    records: list[oracle.Captured],
    outputs: list[oracle.Captured],
    reselect: bool,
) -> tuple[list[Paired], dict[str, int]]:
    """The checks both engines pass (see the module doc); returns the pairs and counts."""
    paired = paired_outputs(capture, topic, records, outputs)
    assert len(paired) == sum(1 for r in records if r.value is not None)
    honesty = check_honest(paired)
    assert not honesty.problems, "\n".join(honesty.problems[:20])
    shapes = oracle.placeholder_shapes(capture.options.binary_handling_mode or "bytes")
    alive = keys_alive_at_end(capture)
    first_seen: set[str] = set()
    counts = {"unmarked": honesty.unmarked, "exact": 0, "current": 0, "unresolved_creates": 0}
    for p in paired:
        key = oracle.canonical_key(p.out.key)
        first = key not in first_seen
        first_seen.add(key)
        placeholders = set(oracle.placeholder_columns(p.raw["after"], shapes))
        if p.raw["op"] == "d" and _is_key_change(p, NEW_KEY) and first:
            # the old key's first event: a key-only before nothing completes
            assert listed(p.out) >= {c for c in p.raw["before"] if c != "id"}, p.source
        exact = headers_of(p.out, HEADER_RESELECTED)
        current = headers_of(p.out, HEADER_RESELECTED_CURRENT)
        if not reselect:
            assert not exact and not current
            if _is_key_change(p, OLD_KEY) and placeholders and first:
                assert placeholders <= listed(p.out), p.source
                counts["unresolved_creates"] += 1
            continue
        after = oracle.payload(p.out.value)["after"]
        for column in exact:
            assert after[column] == p.full["after"][column], (p.source, column)
        counts["exact"] += len(exact)
        counts["current"] += len(current)
        if key in alive and placeholders:
            assert not after_placeholders(p.out, shapes), (p.source, listed(p.out))
    return paired, counts


# -- embedded -------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", ["whole", "small"])
@pytest.mark.parametrize("reselect", [False, True], ids=["no-reselect", "reselect"])
def test_embedded(
    capture: oracle.TwinCapture,
    reselect: bool,
    batch: str,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, records = late_topic(bootstrap, capture, f"e{int(reselect)}{batch}")
    counting = CountingReselect()
    if reselect:
        monkeypatch.setattr(embedded_engine, "batch_reselect", counting)
    if batch == "small":  # a key change's DELETE and CREATE often in different batches
        monkeypatch.setattr(loop, "FIRST_BATCH", 4)
        monkeypatch.setattr(loop, "MAX_BATCH", 4)
    config = config_for(kafka_broker, topic, postgres_module.dsn)
    if not reselect:
        config = replace(config, reselect=None)
    embedded = EmbeddedSettings(state_dir=tmp_path)
    run_once(config, embedded)

    outputs = oracle.consume_all(bootstrap, topic + ".out", expected=len(records))
    paired, counts = check(capture, topic, records, outputs, reselect)
    if not reselect:
        assert counts["unresolved_creates"] >= 8, counts
        assert not counting.queries
    else:
        assert counts["exact"] > 0 and counts["current"] > 0, counts
        assert max(counting.queries.values()) == 1, counting.queries
        # the key change in one transaction with an update of its new key is not exact
        five = [p for p in paired if oracle.canonical_key(p.out.key) == '{"id":105}']
        assert five and headers_of(five[0].out, HEADER_RESELECTED_CURRENT)
        if batch == "whole":
            seeded = _later_events_fill_from_the_seed(kafka_broker, config, embedded, topic, paired)
            assert seeded >= 2, seeded
    print(f"embedded {batch} reselect={reselect}: {len(paired)} outputs, {counts}, queries "
          f"{sum(counting.queries.values())} in {counting.batches} batches")  # fmt: skip


def _later_events_fill_from_the_seed(
    kafka_broker: Broker,
    config: RunConfig,
    embedded: EmbeddedSettings,
    topic: str,
    paired: list[Paired],
) -> int:
    """A later update of each key whose last output was its key change's CREATE re-selected
    exact, through the same application with the database out of reach: the state those values
    seeded fills it. Returns how many keys were so."""
    last: dict[bytes, Paired] = {}
    for p in paired:
        assert p.out.key is not None
        last[p.out.key] = p
    seeded = {
        key: p
        for key, p in last.items()
        if p.out.header(OLD_KEY) is not None
        and headers_of(p.out, HEADER_RESELECTED)
        and not headers_of(p.out, HEADER_RESELECTED_CURRENT)
    }
    bootstrap = kafka_broker.bootstrap_servers
    before = oracle.consume_all(bootstrap, topic + ".out")
    newer = [
        oracle.Captured(topic, p.out.partition, -1, key, later(_bare(p.raw), 7), ())
        for key, p in seeded.items()
    ]
    produce(bootstrap, topic, newer)
    unreachable = ReselectSettings("postgresql://postgres@127.0.0.1:1/none", connect_timeout_s=1)
    run_once(replace(config, reselect=unreachable), embedded)
    outputs = oracle.consume_all(bootstrap, topic + ".out", expected=len(before) + len(newer))
    fresh = _fresh(before, outputs)
    for key, p in seeded.items():
        out = fresh[key]
        exact = headers_of(p.out, HEADER_RESELECTED)
        assert set(exact) <= set(headers_of(out, "hydrator.filled")), key
        assert not headers_of(out, "hydrator.unresolved"), key
        after, was = oracle.payload(out.value)["after"], oracle.payload(p.out.value)["after"]
        assert all(after[c] == was[c] for c in exact), key
    return len(seeded)


def _bare(payload: dict[str, Any]) -> bytes:
    return orjson.dumps(payload)


def _fresh(
    before: list[oracle.Captured], outputs: list[oracle.Captured]
) -> dict[bytes | None, oracle.Captured]:
    seen = {o.header("hydrator.source") for o in before}
    return {o.key: o for o in outputs if o.header("hydrator.source") not in seen}


# -- Spark ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("reselect", [False, True], ids=["no-reselect", "reselect"])
def test_spark(
    capture: oracle.TwinCapture,
    reselect: bool,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
    tmp_path: Path,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, records = late_topic(bootstrap, capture, f"s{int(reselect)}")
    args = spark_args(
        bootstrap,
        f"kc-spark-{uuid.uuid4().hex[:6]}",
        [topic],
        tmp_path,
        "--available-now",
        "--format",
        "debezium",
    )
    env = {"HYDRATOR_RESELECT": postgres_module.dsn} if reselect else None
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    outputs = oracle.consume_all(bootstrap, topic + ".hydrated", expected=len(records))
    paired, counts = check(capture, topic, records, outputs, reselect)
    if reselect:
        assert counts["exact"] > 0, counts
    else:
        assert counts["unresolved_creates"] >= 8, counts
    print(f"spark reselect={reselect}: {len(paired)} outputs, {counts}")
