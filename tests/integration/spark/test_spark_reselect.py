"""The re-select fallback through the Spark engine (docs/cold-start.md, "Re-select fallback"), as
tests/integration/embedded/test_embedded_reselect.py checks it through the embedded one: real
Postgres, real Debezium, a stream that begins after its rows were inserted, an empty state. Spark
runs are slow, so the file makes two, `hydrator run --engine spark --available-now` as an operator
runs it (the DSN, with a password, in HYDRATOR_RESELECT; the database behind a TCP proxy):

1. Both envelopes' topics, the database up: every placeholder filled (0 unresolved in `after`);
   each re-selected column in exactly one of `hydrator.reselected` / `.current`; exact columns
   equal to the REPLICA IDENTITY FULL twin's value at that event, and claimed only by the row's
   last writer; one micro-batch, so at most one query per table per partition
   (`reselect_queries`, and the table's scans in pg_stat_user_tables agree).
2. The proxy cut (the database unreachable), later events of every key, and one of a key never
   seen: the run ends as usual, every record comes out once; the keys whose last event was
   re-selected exact are filled from the state those columns seeded (through the bootstrap
   topic), the unseen key's columns are unresolved. The password is in no output.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.core.reselected import HEADER_RESELECTED, HEADER_RESELECTED_CURRENT
from tests.harness import oracle
from tests.harness.hydrator_process import run_to_completion
from tests.harness.kafka import Broker
from tests.harness.postgres import PgDatabase
from tests.harness.proxy import TcpProxy
from tests.harness.reselect import (
    PARTITIONS,
    PASSWORD,
    check_reselected_outputs,
    headers_of,
    late_topic,
    produce,
    reselect_workload,
)
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

pytestmark = pytest.mark.integration

MISSING_KEY = 999


@pytest.fixture(scope="module")
def capture(
    debezium_jvm: None, kafka_broker: Broker, postgres_module: PgDatabase
) -> dict[bool, oracle.TwinCapture]:
    """One Debezium run, serialized with schemas.enable true and false."""
    return oracle.capture_twins_envelopes(
        postgres_module,
        kafka_broker.bootstrap_servers,
        reselect_workload(),
        f"sresel_{uuid.uuid4().hex[:6]}",
        envelopes=(True, False),
        partitions=PARTITIONS,
    )


@pytest.fixture(scope="module")
def proxy(postgres_module: PgDatabase) -> Iterator[TcpProxy]:
    with TcpProxy(postgres_module.port) as p:
        yield p


@dataclass
class App:
    name: str
    state_dir: Path
    dsn: str
    topics: dict[bool, str]  # schemas.enable -> the late topic
    records: dict[bool, list[oracle.Captured]]


@dataclass
class Run:
    output: str  # stdout and stderr
    counts: dict[str, int]  # the run's counters, as its last available-now line gives them


def run_spark(kafka_broker: Broker, app: App, timeout_s: float = SPARK_TIMEOUT_S) -> Run:
    args = spark_args(
        kafka_broker.bootstrap_servers,
        app.name,
        [app.topics[True], app.topics[False]],
        app.state_dir,
        "--available-now",
        "--format",
        "debezium",
        "--reselect-max-qps",
        "60",
    )
    done = run_to_completion(args, timeout_s=timeout_s, env={"HYDRATOR_RESELECT": app.dsn})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return Run(output, counted(output))


def counted(output: str) -> dict[str, int]:
    """The counters of the run's available-now lines (`available-now run: {...}`), summed."""
    totals: dict[str, int] = {}
    for found in re.finditer(r"available-now run: (\{[^}]*\})", output):
        for name, n in re.findall(r"'(\w+)': (\d+)", found.group(1)):
            totals[name] = totals.get(name, 0) + int(n)
    return totals


def table_scans(db: PgDatabase, table: str) -> int:
    """Scans of `table` so far (each re-select query is one, sequential or by index)."""
    with db.connect() as conn:
        row = conn.execute(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables "
            "WHERE relname = %s",
            [table],
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture(scope="module")
def first_run(
    capture: dict[bool, oracle.TwinCapture],
    kafka_broker: Broker,
    postgres_module: PgDatabase,
    proxy: TcpProxy,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[App, Run, int]:
    """The first run, and the scans of the source table it made."""
    bootstrap = kafka_broker.bootstrap_servers
    name = f"sresel-{uuid.uuid4().hex[:6]}"
    topics, records = {}, {}
    for schemas in (True, False):
        topics[schemas], records[schemas] = late_topic(bootstrap, capture[schemas], name)
    db = postgres_module
    dsn = f"postgresql://{db.user}:{PASSWORD}@127.0.0.1:{proxy.port}/{db.dbname}"
    app = App(name, tmp_path_factory.mktemp("spark-reselect"), dsn, topics, records)
    table = capture[False].twins.default
    before = table_scans(db, table)
    run = run_spark(kafka_broker, app)
    # a backend reports its table statistics within a second, and as it exits
    deadline = time.monotonic() + 15
    scans = table_scans(db, table) - before
    while scans < run.counts.get("reselect_queries", 0) and time.monotonic() < deadline:
        time.sleep(0.5)
        scans = table_scans(db, table) - before
    return app, run, scans


def test_an_empty_state_reselects_every_placeholder_and_says_which_are_exact(
    capture: dict[bool, oracle.TwinCapture],
    first_run: tuple[App, Run, int],
    kafka_broker: Broker,
) -> None:
    app, run, scans = first_run
    assert PASSWORD not in run.output
    exact = current = 0
    for schemas in (True, False):
        topic, records = app.topics[schemas], app.records[schemas]
        outputs = oracle.consume_all(
            kafka_broker.bootstrap_servers, topic + ".hydrated", expected=len(records)
        )
        checked = check_reselected_outputs(capture[schemas], topic, records, outputs)
        exact += checked.exact
        current += checked.current
        # the row updated twice in one transaction, both in the batch: the first is not exact
        eleven = checked.by_key['{"id":11}']
        assert len(eleven) == 2 and not headers_of(eleven[0], HEADER_RESELECTED)
        assert headers_of(eleven[0], HEADER_RESELECTED_CURRENT)
    assert exact > 0 and current > 0
    counts = run.counts
    assert counts["reselected_columns_exact"] == exact, counts
    assert counts["reselected_columns_current"] == current, counts
    assert not counts.get("reselect_failures") and not counts.get("reselect_skipped"), counts
    # one micro-batch: one query per table (both topics are of one table) and partition at most
    queries = counts["reselect_queries"]
    assert 1 <= queries <= PARTITIONS, counts
    assert scans == queries, (scans, queries)
    deferred = sum(len(r) for r in app.records.values())
    print(f"spark re-select: {deferred} records, {exact} exact and {current} current columns, "
          f"{queries} queries")  # fmt: skip


def later(value: bytes, small: int, key: int | None = None) -> bytes:
    """A later update of the row `value` (a schemas.enable false Debezium event) is of: its
    position past every captured one, its `small` column new, its placeholders as they were;
    with `key`, of that row instead."""
    event = orjson.loads(value)
    source = event["source"]
    bump = 10**9
    last_commit, lsn = orjson.loads(source["sequence"])
    sequence = [str(int(last_commit or 0) + bump), str(int(lsn) + bump)]
    source["sequence"] = orjson.dumps(sequence).decode()
    source["lsn"] = int(source["lsn"]) + bump
    source["txId"] = int(source["txId"]) + bump
    event["op"] = "u"
    event["after"]["small"] = small
    if key is not None:
        event["after"]["id"] = key
    return orjson.dumps(event)


def test_an_unreachable_database_stops_nothing_and_seeded_keys_need_it_not(
    capture: dict[bool, oracle.TwinCapture],
    first_run: tuple[App, Run, int],
    kafka_broker: Broker,
    proxy: TcpProxy,
) -> None:
    app, _, _ = first_run
    bootstrap = kafka_broker.bootstrap_servers
    topic, records = app.topics[False], app.records[False]
    before = oracle.consume_all(bootstrap, topic + ".hydrated", expected=len(records))
    last: dict[bytes, oracle.Captured] = {}  # key -> the first run's last output of it
    for out in before:
        assert out.key is not None
        last[out.key] = out
    last_input = {r.key: r for r in records if r.value is not None}
    template = records[-1]
    assert template.value is not None
    newer = [
        oracle.Captured(topic, r.partition, -1, key, later(r.value or b"", 7), ())
        for key, r in last_input.items()
    ]
    unseen = orjson.dumps({"id": MISSING_KEY})
    newer.append(oracle.Captured(topic, 0, -1, unseen, later(template.value, 7, MISSING_KEY), ()))
    proxy.cut(600)
    produce(bootstrap, topic, newer)

    run = run_spark(kafka_broker, app)

    assert PASSWORD not in run.output
    outputs = oracle.consume_all(bootstrap, topic + ".hydrated", expected=len(before) + len(newer))
    sources = [o.header(HEADER_SOURCE) for o in outputs]
    assert len(sources) == len(set(sources)) == len(before) + len(newer), "each once"
    seen_before = {o.header(HEADER_SOURCE) for o in before}
    fresh = {o.key: o for o in outputs if o.header(HEADER_SOURCE) not in seen_before}
    assert len(fresh) == len(newer)
    assert headers_of(fresh[unseen], HEADER_UNRESOLVED), "the database down: unresolved"
    seeded = 0
    for key, previous in last.items():
        exact = headers_of(previous, HEADER_RESELECTED)
        current = headers_of(previous, HEADER_RESELECTED_CURRENT)
        out = fresh[key]
        if exact and not current:
            # filled from the state the exact columns seeded: no database needed
            assert set(exact) <= set(headers_of(out, HEADER_FILLED)), key
            assert not headers_of(out, HEADER_UNRESOLVED), key
            after, was = oracle.payload(out.value)["after"], oracle.payload(previous.value)["after"]
            assert all(after[c] == was[c] for c in exact), key
            seeded += 1
    assert seeded >= len(last) // 2, (seeded, len(last))
    counts = run.counts
    assert counts.get("reselect_failures", 0) >= 1, counts
    assert "re-select from 127.0.0.1" in run.output
    print(f"database cut: {len(newer)} records, {seeded} keys filled from re-selected state")
