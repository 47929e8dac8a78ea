"""`hydrator state bootstrap` end to end, embedded engine and Spark (docs/cold-start.md).

Real Postgres, real Debezium (snapshot.mode=no_data: the stream begins after 40 rows exist),
the oracle's twin tables and mixed workload, 4 partitions. The command runs as a process, as an
operator runs it, and so does `hydrator run --available-now`:

* no bootstrap: outputs carry `hydrator.unresolved`;
* bootstrapped from Postgres before the stream: no output unresolved, every one (before images
  too) equal to the REPLICA IDENTITY FULL twin's;
* bootstrapped from Postgres while writers run (one of them holds its transaction open across
  the snapshot): no unmarked output differs from the twin's, and every event of a transaction
  the snapshot does not see is out, unmarked and exact;
* bootstrapped from the enriched topic of the earlier run, then more writes: the same;
* a second bootstrap of the same source writes nothing; a running application is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer

from hydrator.core.visibility import SourceSnapshot, visible
from hydrator.demo.connector import SETTINGS_FILE
from tests.harness import oracle
from tests.harness.debezium import BridgeOptions, DebeziumBridge, create_topics
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.oracle import Captured, Statement, Workload
from tests.harness.postgres import PgDatabase

pytestmark = pytest.mark.integration

PARTITIONS = 4
INITIAL_ROWS = 40
OPERATIONS = 300
PHASE_ONE = 200  # statements of the workload before the later deployment's bootstrap


def bootstrap_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`hydrator state bootstrap ... --json` as a process."""
    return subprocess.run(
        [sys.executable, "-m", "hydrator.cli", "state", "bootstrap", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def bootstrapped(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class World:
    bootstrap_servers: str
    options: BridgeOptions
    default_topic: str
    full_topic: str
    table: str
    dsn: str
    state_root: Path
    phase_one_full: list[Captured]
    phase_one_raw: list[Captured]
    all_full: list[Captured]
    all_raw: list[Captured]
    snapshot_while_writing: SourceSnapshot
    results: dict[str, Any]

    def from_postgres(self, app: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return bootstrap_cli(*self.common(app), "--from-postgres", self.dsn, "--table", self.table,
                             "--connector-config", str(SETTINGS_FILE), *extra)  # fmt: skip

    def from_topic(self, app: str, topic: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return bootstrap_cli(
            *self.common(app), "--from-topic", topic, "--format", "debezium", *extra
        )

    def common(self, app: str) -> list[str]:
        return [
            "--bootstrap-servers", self.bootstrap_servers, "--input-topic", self.default_topic,
            "--application-id", app, "--state-dir", str(self.state_root / app),
        ]  # fmt: skip

    def run(self, app: str, engine: str = "embedded") -> list[Captured]:
        output = f"{app}.out"
        args = run_args(
            self.bootstrap_servers,
            app,
            [self.default_topic],
            self.state_root / app,
            "--available-now",
            output_topic=output,
        )
        if engine == "spark":
            args[args.index("embedded")] = "spark"
            args += ["--master", "local[2]"]
        done = run_to_completion(args, timeout_s=240 if engine == "embedded" else 600)
        assert done.returncode == 0, done.stderr[-3000:]
        return oracle.consume_all(self.bootstrap_servers, output)


def _split(
    workload: Workload,
) -> tuple[list[Statement], list[list[Statement]], list[list[Statement]]]:
    """The initial inserts; then every row touched once and the first part of the rest, in
    transactions; then the rest."""
    statements = list(workload.statements)
    initial, rest = statements[:INITIAL_ROWS], statements[INITIAL_ROWS:]
    touch = [
        oracle.update_statement(k, {"label": f"touched {k}"}) for k in range(1, INITIAL_ROWS + 1)
    ]
    one = [[s] for s in touch] + [rest[i : i + 2] for i in range(0, PHASE_ONE, 2)]
    two = [rest[i : i + 2] for i in range(PHASE_ONE, len(rest), 2)]
    return initial, one, two


def _run_transactions(db: PgDatabase, twins: oracle.TwinTables, txs: list[list[Statement]]) -> None:
    oracle.run_workload(db, twins, Workload(txs))


def _hold_an_update(db: PgDatabase, twins: oracle.TwinTables) -> psycopg.Connection:
    """An open transaction that updated one live row of both twins (not committed)."""
    conn = psycopg.connect(db.dsn)
    for key in range(1, INITIAL_ROWS + 1):
        statement = Statement(
            "update", "UPDATE {table} SET small = small + 1 WHERE id = %s", (key,)
        )
        if conn.execute(statement.compose(twins.default), statement.params).rowcount == 1:
            conn.execute(statement.compose(twins.full), statement.params)
            return conn
    raise AssertionError("no live row to hold")


@pytest.fixture(scope="module")
def world(
    debezium_jvm: None,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
    tmp_path_factory: pytest.TempPathFactory,
) -> World:
    servers = kafka_broker.bootstrap_servers
    db = postgres_module
    base = f"boot_{uuid.uuid4().hex[:6]}"
    twins = oracle.create_twin_tables(db, base)
    workload = oracle.generate_workload(seed=27, operations=OPERATIONS, initial_rows=INITIAL_ROWS)
    initial, one, two = _split(workload)
    oracle.run_workload(
        db, twins, Workload.of(*initial)
    )  # before any stream: Debezium never sees them

    default_topic, full_topic = f"{base}.default", f"{base}.full"
    options = BridgeOptions(tables=twins.qualified, partitions=PARTITIONS)
    options.topic_map = {
        options.debezium_topic(f"public.{twins.default}"): default_topic,
        options.debezium_topic(f"public.{twins.full}"): full_topic,
    }
    create_topics(servers, [default_topic, full_topic], PARTITIONS)
    root = tmp_path_factory.mktemp("bootstrap")
    w = World(servers, options, default_topic, full_topic, f"public.{twins.default}", db.dsn, root,
              [], [], [], [], SourceSnapshot(1, 1, frozenset()), {})  # fmt: skip
    results = w.results

    # before the stream: bootstrap A twice (the second writes nothing)
    results["before"] = bootstrapped(w.from_postgres("app-before"))
    results["before_again"] = bootstrapped(w.from_postgres("app-before"))
    results["spark_before"] = bootstrapped(w.from_postgres("spark-before", "--engine", "spark"))

    expected_one = sum(oracle._RECORDS_PER_KIND[s.kind] for tx in one for s in tx) + 1
    expected_two = sum(oracle._RECORDS_PER_KIND[s.kind] for tx in two for s in tx)
    middle = len(one) // 2
    with DebeziumBridge(db, servers, options) as bridge:
        _run_transactions(db, twins, one[:middle])
        held = _hold_an_update(db, twins)
        writers = threading.Thread(target=_run_transactions, args=(db, twins, one[middle:]))
        writers.start()
        time.sleep(0.2)
        results["while"] = bootstrapped(w.from_postgres("app-while"))
        spark_while = w.from_postgres("spark-while", "--engine", "spark")
        results["spark_while"] = bootstrapped(spark_while)
        held.commit()
        held.close()
        writers.join()
        bridge.wait_for(expected_one, topic=default_topic, timeout_s=180)
        bridge.wait_for(expected_one, topic=full_topic, timeout_s=180)
        w.phase_one_raw = oracle.consume_all(servers, default_topic, expected=expected_one)
        w.phase_one_full = oracle.consume_all(servers, full_topic, expected=expected_one)

        results["none"] = w.run("app-none")
        results["before_out"] = w.run("app-before")
        results["while_out"] = w.run("app-while")

        # a later deployment: state from the earlier run's enriched topic, then more writes
        results["topic"] = bootstrapped(w.from_topic("app-topic", "app-before.out"))
        results["topic_again"] = bootstrapped(w.from_topic("app-topic", "app-before.out"))
        spark_topic = w.from_topic("spark-topic", "app-before.out", "--engine", "spark")
        results["spark_topic"] = bootstrapped(spark_topic)
        _run_transactions(db, twins, two)
        total = expected_one + expected_two
        bridge.wait_for(total, topic=default_topic, timeout_s=180)
        bridge.wait_for(total, topic=full_topic, timeout_s=180)
        w.all_raw = oracle.consume_all(servers, default_topic, expected=total)
        w.all_full = oracle.consume_all(servers, full_topic, expected=total)
    results["topic_out"] = w.run("app-topic")
    w.snapshot_while_writing = SourceSnapshot.parse(results["while"]["snapshot"])
    return w


def _marked(record: Captured) -> bool:
    return (
        record.header("hydrator.unresolved") is not None
        or record.header("hydrator.stale") is not None
    )


def _pairs(
    outputs: list[Captured], full: list[Captured]
) -> list[tuple[Captured, oracle.Event, oracle.Event]]:
    """Each output with its hydrated event and the twin's, event by event per key."""
    by_where = {f"{r.topic}:{r.partition}:{r.offset}": r for r in outputs}
    hydrated = oracle.events_by_key(oracle.captured_triples(outputs))
    twin = oracle.events_by_key(oracle.captured_triples(full))
    assert {k: len(v) for k, v in hydrated.items()} == {k: len(v) for k, v in twin.items()}
    return [
        (by_where[h.where], h, f)
        for key in hydrated
        for h, f in zip(hydrated[key], twin[key], strict=True)
    ]


def _same(h: oracle.Event, f: oracle.Event) -> bool:
    if h.value is None or f.value is None:
        return h.value is None and f.value is None
    return (h.op, h.value.get("after"), h.value.get("before")) == (
        f.op, f.value.get("after"), f.value.get("before"),
    )  # fmt: skip


def _diff(h: oracle.Event, f: oracle.Event) -> str:
    m: list[oracle.Mismatch] = []
    for name in ("after", "before"):
        got = (h.value or {}).get(name)
        want = (f.value or {}).get(name)
        oracle._compare_image(m, name, h.key, 0, got, want, h, f)
    tx = (h.value or {}).get("source", {}).get("txId")
    return f"txId {tx} op {h.op}: " + "; ".join(str(x)[:300] for x in m)


def _history(pairs: Any, key: str, snapshot: SourceSnapshot) -> str:
    lines = [f"snapshot {snapshot}"]
    for out, h, _f in pairs:
        if h.key != key:
            continue
        tx = (h.value or {}).get("source", {}).get("txId")
        marks = {
            n: out.header(n) for n in ("hydrator.stale", "hydrator.unresolved", "hydrator.filled")
        }
        lines.append(f"{h.where} {h.op} tx {tx} visible {tx and visible(snapshot, tx)} {marks}")
    return "\n".join(lines)


def test_without_bootstrap_outputs_are_unresolved(world: World) -> None:
    unresolved = [r for r in world.results["none"] if r.header("hydrator.unresolved")]
    assert len(unresolved) > 0


def test_bootstrap_before_the_stream_makes_every_output_exact(world: World) -> None:
    summary = world.results["before"]
    assert summary["rows"] == INITIAL_ROWS and summary["bootstrapped_keys"] == INITIAL_ROWS
    outputs = world.results["before_out"]
    assert len(outputs) == len(world.phase_one_raw)
    check_exact(outputs, world.phase_one_full)


def test_a_second_bootstrap_of_the_same_source_writes_nothing(world: World) -> None:
    again = world.results["before_again"]
    assert again["rows"] == INITIAL_ROWS
    assert again["bootstrapped_keys"] == 0 and again["kept_keys"] == INITIAL_ROWS
    assert world.results["topic_again"]["bootstrapped_keys"] == 0


def check_exact(outputs: list[Captured], full: list[Captured]) -> None:
    """No output marked, every one equal to the twin's (before images too)."""
    assert [r for r in outputs if _marked(r)] == []
    hydrated = oracle.events_by_key(oracle.captured_triples(outputs))
    mismatches = oracle.compare(hydrated, oracle.events_by_key(oracle.captured_triples(full)))
    assert not mismatches, oracle.report(mismatches)


def check_while_writing(
    outputs: list[Captured], full: list[Captured], snapshot: SourceSnapshot
) -> None:
    """No unmarked output differs from the twin's; every event of a transaction the snapshot
    does not see is out, unmarked and exact."""
    assert snapshot.xip, "a writer held its transaction open across the snapshot"
    pairs = _pairs(outputs, full)
    after = contained = 0
    for out, h, f in pairs:
        if not _marked(out):
            assert _same(h, f), f"unmarked output differs: {h.where} {_diff(h, f)}\n" + _history(
                pairs, h.key, snapshot
            )
        if h.value is None:
            continue
        tx = h.value["source"]["txId"]
        if not visible(snapshot, tx):
            after += 1
            assert not _marked(out), f"event after the snapshot marked: {h.where}"
            assert _same(h, f), f"event after the snapshot differs: {h.where}"
        elif out.header("hydrator.stale") == b"bootstrap":
            contained += 1
    assert after > 50 and contained > 0


def check_from_topic(
    outputs: list[Captured], full: list[Captured], earlier: list[Captured]
) -> None:
    """No unmarked output differs; every event after the earlier topic is out and exact."""
    phase_one = {(r.partition, r.offset) for r in earlier}
    pairs = _pairs(outputs, full)
    later = 0
    for out, h, f in pairs:
        if not _marked(out):
            assert _same(h, f), f"unmarked output differs: {h.where}"
        source = out.header("hydrator.source").decode().rsplit(":", 2)
        if (int(source[1]), int(source[2])) not in phase_one:
            later += 1
            assert not _marked(out) and _same(h, f), f"later event not exact: {h.where}"
    assert later > 50


def test_bootstrap_while_writers_run(world: World) -> None:
    check_while_writing(
        world.results["while_out"], world.phase_one_full, world.snapshot_while_writing
    )


def test_bootstrap_from_an_enriched_topic(world: World) -> None:
    assert world.results["topic"]["bootstrapped_keys"] > INITIAL_ROWS // 2
    check_from_topic(world.results["topic_out"], world.all_full, world.phase_one_raw)


def test_spark_bootstrap_before_the_stream(world: World) -> None:
    assert world.results["spark_before"]["bootstrapped_keys"] == INITIAL_ROWS
    check_exact(world.run("spark-before", "spark"), world.all_full)


def test_spark_bootstrap_while_writers_run(world: World) -> None:
    snapshot = SourceSnapshot.parse(world.results["spark_while"]["snapshot"])
    check_while_writing(world.run("spark-while", "spark"), world.all_full, snapshot)


def test_spark_bootstrap_from_an_enriched_topic(world: World) -> None:
    outputs = world.run("spark-topic", "spark")
    check_from_topic(outputs, world.all_full, world.phase_one_raw)


def test_a_running_application_is_refused(world: World) -> None:
    app = f"app-running-{uuid.uuid4().hex[:4]}"
    consumer = Consumer(
        {
            "bootstrap.servers": world.bootstrap_servers,
            "group.id": app,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([world.default_topic])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        done = world.from_topic(app, "app-before.out")
        assert done.returncode == 2, done.stderr
        assert "running" in done.stderr
    finally:
        consumer.close()
