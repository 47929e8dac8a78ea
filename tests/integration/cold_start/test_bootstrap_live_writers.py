"""`hydrator state bootstrap --from-postgres` while writers delete and re-key rows, through both
engines (docs/cold-start.md): real Postgres, real Debezium, the table's twin with REPLICA
IDENTITY FULL, `hydrator state bootstrap` and `hydrator run --available-now` as processes.

Before the bootstrap, rows are deleted and re-keyed (the snapshot holds no row for their keys,
so no image carries it), some of them as their key's first event in the stream; one transaction
deletes, re-keys and updates rows across the snapshot (open while it is taken); other writers
delete, re-key and update rows while the bootstrap reads; after it, every row is written again.
A column declared `DEFAULT 'dflt'` is set to NULL now and then, and many rows hold NULL in it
when the bootstrap reads them.

* every output without a mark (`hydrator.stale`, `hydrator.unresolved`) equals the FULL twin's
  row at that event, `before` included; a marked one equals it outside the columns it lists;
* every event of a transaction the snapshot does not hold comes out unmarked and exact;
* the events of rows deleted or re-keyed before the snapshot come out `hydrator.stale:
  bootstrap`, whatever their key, on both engines (their state read back from the snapshots
  topic when each engine starts);
* a NULL written to the defaulted column arrives as NULL (`replace.null.with.default=false`):
  the bootstrap, which reads NULL, and the stream agree (with the converter's default, the same
  events carry "dflt").
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from hydrator.core.visibility import SourceSnapshot, visible
from tests.harness import oracle
from tests.harness.cold_start import outside
from tests.harness.debezium import BridgeOptions, DebeziumBridge, Output, create_topics
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.oracle import Captured, Statement, TwinTables
from tests.harness.postgres import PgDatabase
from tests.integration.cold_start.test_bootstrap_end_to_end import (
    _diff,
    _history,
    _marked,
    _pairs,
    _same,
    bootstrap_cli,
    bootstrapped,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
ROWS = 40

_DDL = """
CREATE TABLE {table} (
    id    integer PRIMARY KEY,
    small integer,
    label varchar(40),
    note  text DEFAULT 'dflt',
    body  text
)"""


def _insert(key: int, rng: random.Random, note: str | None = "given") -> Statement:
    value = None if note is None else f"n{key}"
    body = oracle._text(rng, 3000 + rng.randrange(2000))
    return Statement(
        "insert",
        "INSERT INTO {table} (id, small, label, note, body) VALUES (%s, %s, %s, %s, %s)",
        (key, rng.randrange(1000), f"row {key}", value, body),
    )


def _insert_default(key: int, rng: random.Random) -> Statement:
    """An insert that leaves `note` to its default."""
    body = oracle._text(rng, 3500)
    return Statement(
        "reinsert", "INSERT INTO {table} (id, small, body) VALUES (%s, %s, %s)", (key, 1, body)
    )


def _small(key: int, value: int) -> Statement:
    return Statement("update", "UPDATE {table} SET small = %s WHERE id = %s", (value, key))


def _note_null(key: int) -> Statement:
    return Statement("update", "UPDATE {table} SET note = NULL WHERE id = %s", (key,))


def _rekey(key: int, new: int) -> Statement:
    return Statement("pk_change", "UPDATE {table} SET id = %s WHERE id = %s", (new, key))


def _delete(key: int) -> Statement:
    return oracle.delete_statement(key)


def _alive(ids: set[int], txs: list[list[Statement]]) -> set[int]:
    """The ids `ids` become once `txs` ran."""
    alive = set(ids)
    for tx in txs:
        for statement in tx:
            if statement.kind == "delete":
                alive.remove(statement.params[0])
            elif statement.kind == "pk_change":
                new, old = statement.params
                alive.remove(old)
                alive.add(new)
            elif statement.kind in ("insert", "reinsert"):
                alive.add(statement.params[0])
    return alive


def _records(statements: list[Statement]) -> int:
    return sum(oracle._RECORDS_PER_KIND[s.kind] for s in statements)


@dataclass
class World:
    servers: str
    default_topic: str
    full_topic: str
    replacing_topic: str
    table: str
    dsn: str
    root: Path
    raw: list[Captured] = field(default_factory=list)
    full: list[Captured] = field(default_factory=list)
    replacing: list[Captured] = field(default_factory=list)
    snapshots: dict[str, SourceSnapshot] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    # ids whose rows were deleted or re-keyed before any bootstrap (their keys have no image)
    gone_before: set[int] = field(default_factory=set)

    def bootstrap(self, app: str, engine: str) -> None:
        done = bootstrap_cli(
            "--bootstrap-servers", self.servers, "--input-topic", self.default_topic,
            "--application-id", app, "--state-dir", str(self.root / app),
            "--from-postgres", self.dsn, "--table", self.table, "--engine", engine,
        )  # fmt: skip
        self.summaries[app] = bootstrapped(done)
        self.snapshots[app] = SourceSnapshot.parse(self.summaries[app]["snapshot"])

    def run(self, app: str, engine: str) -> list[Captured]:
        output = f"{app}.out"
        args = run_args(
            self.servers, app, [self.default_topic], self.root / app, "--available-now",
            output_topic=output,
        )  # fmt: skip
        if engine == "spark":
            args[args.index("embedded")] = "spark"
            args += ["--master", "local[2]"]
        done = run_to_completion(args, timeout_s=240 if engine == "embedded" else 600)
        assert done.returncode == 0, done.stderr[-3000:]
        return oracle.consume_all(self.servers, output, expected=len(self.raw))


def _create_tables(db: PgDatabase, twins: TwinTables) -> None:
    with db.connect() as conn:
        for table in (twins.default, twins.full):
            ident = sql.Identifier(table)
            conn.execute(sql.SQL(_DDL).format(table=ident))
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN body SET STORAGE EXTERNAL").format(ident)
            )
        conn.execute(
            sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(sql.Identifier(twins.full))
        )


def _run(
    db: PgDatabase, twins: TwinTables, txs: list[list[Statement]], pause_s: float = 0.0
) -> None:
    with psycopg.connect(db.dsn) as conn:
        for tx in txs:
            for table in (twins.default, twins.full):
                with conn.transaction():
                    for statement in tx:
                        cur = conn.execute(statement.compose(table), statement.params)
                        assert cur.rowcount == 1, (statement, table)
            if pause_s:
                time.sleep(pause_s)


def _hold(db: PgDatabase, twins: TwinTables, statements: list[Statement]) -> psycopg.Connection:
    """One open transaction that ran `statements` on both twins (not committed)."""
    conn = psycopg.connect(db.dsn)
    for table in (twins.default, twins.full):
        for statement in statements:
            assert conn.execute(statement.compose(table), statement.params).rowcount == 1
    return conn


@pytest.fixture(scope="module")
def world(
    debezium_jvm: None,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
    tmp_path_factory: pytest.TempPathFactory,
) -> World:
    servers = kafka_broker.bootstrap_servers
    db = postgres_module
    base = f"live_{uuid.uuid4().hex[:6]}"
    twins = TwinTables(base)
    _create_tables(db, twins)
    rng = random.Random(41)
    # before the stream: every third row's note NULL
    _run(db, twins, [[_insert(k, rng, None if k % 3 == 0 else "n")] for k in range(1, ROWS + 1)])

    w = World(servers, f"{base}.default", f"{base}.full", f"{base}.default.replacing",
              f"public.{twins.default}", db.dsn, tmp_path_factory.mktemp("live"))  # fmt: skip
    options = BridgeOptions(tables=twins.qualified, partitions=PARTITIONS)
    default_name = options.debezium_topic(f"public.{twins.default}")
    options.topic_map = {
        default_name: w.default_topic,
        options.debezium_topic(f"public.{twins.full}"): w.full_topic,
    }
    # the same events through JsonConverter's own default: a NULL written as the default
    options.extra_outputs = [
        Output(False, {default_name: w.replacing_topic}, converter_settings={})
    ]
    create_topics(servers, [w.default_topic, w.full_topic, w.replacing_topic], PARTITIONS)

    # before the bootstrap: deleted, re-keyed (as their key's first event, or after an update),
    # re-keyed twice, onto a freed id; the defaulted column set NULL
    before = [
        *([_delete(k)] for k in (1, 2, 3, 4)),
        *([_rekey(k, 100 + k)] for k in (5, 6, 7, 8)),
        [_small(9, 1)], [_delete(9)], [_small(10, 1)], [_rekey(10, 110)],
        [_rekey(11, 111)], [_rekey(111, 211)],
        *([_note_null(k)] for k in (12, 13, 14)),
        [_rekey(15, 1)],
    ]  # fmt: skip
    w.gone_before = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 111, 15}
    held = [_delete(16), _rekey(17, 117), _small(18, 5)]
    during = [
        [_delete(19)], [_rekey(20, 120)], [_small(21, 3)], [_note_null(22)], [_rekey(23, 123)],
        [_delete(24)], [_small(25, 4)], [_rekey(26, 126)], [_note_null(27)], [_delete(28)],
        [_rekey(120, 220)], [_small(29, 6)],
    ]  # fmt: skip
    live_after = _alive(set(range(1, ROWS + 1)), [*before, held, *during])
    after = [
        *([_small(k, 9)] for k in sorted(live_after)),
        *([_note_null(k)] for k in (30, 31, 105)),
        [_insert_default(2, rng)], [_insert_default(3, rng)],
        [_rekey(105, 5)], [_delete(106)], [_small(5, 10)],
    ]  # fmt: skip
    expected = _records([s for tx in [*before, *during, *after] for s in tx] + held)

    with DebeziumBridge(db, servers, options) as bridge:
        _run(db, twins, before)
        holding = _hold(db, twins, held)
        writers = threading.Thread(target=_run, args=(db, twins, during, 0.3))
        writers.start()
        time.sleep(0.2)
        w.bootstrap("live-embedded", "embedded")
        w.bootstrap("live-spark", "spark")
        holding.commit()
        holding.close()
        writers.join()
        _run(db, twins, after)
        for topic in (w.default_topic, w.full_topic, w.replacing_topic):
            bridge.wait_for(expected, topic=topic, timeout_s=180)
        w.raw = oracle.consume_all(servers, w.default_topic, expected=expected)
        w.full = oracle.consume_all(servers, w.full_topic, expected=expected)
        w.replacing = oracle.consume_all(servers, w.replacing_topic, expected=expected)
    return w


def check_live(outputs: list[Captured], full: list[Captured], snapshot: SourceSnapshot,
               gone_before: set[int]) -> dict[str, int]:  # fmt: skip
    assert snapshot.xip, "a writer held its transaction open across the snapshot"
    pairs = _pairs(outputs, full)
    counts = {"after": 0, "stale": 0, "gone_stale": 0, "unmarked": 0}
    for out, h, f in pairs:
        if h.value is None:
            continue
        if not _marked(out):
            counts["unmarked"] += 1
            assert _same(h, f), f"unmarked output differs: {h.where} {_diff(h, f)}\n" + _history(
                pairs, h.key, snapshot
            )
        else:
            columns = {
                c for c in (out.header("hydrator.unresolved") or b"").decode().split(",") if c
            }
            for name in ("after", "before"):
                got, want = h.value.get(name), (f.value or {}).get(name)
                if name == "before" and got is None:
                    continue
                assert outside(got, columns) == outside(want, columns), (
                    f"{h.where} {name}: {_diff(h, f)}"
                )
        tx = h.value["source"]["txId"]
        if not visible(snapshot, tx):
            counts["after"] += 1
            assert not _marked(out), f"event after the snapshot marked: {h.where}"
        elif out.header("hydrator.stale") == b"bootstrap":
            counts["stale"] += 1
            key = oracle.payload(out.key)["id"]
            if key in gone_before:
                counts["gone_stale"] += 1
    assert counts["after"] > 40 and counts["stale"] > 0, counts
    return counts


def _check_engine(world: World, app: str, engine: str) -> None:
    outputs = world.run(app, engine)
    assert len(outputs) == len(world.raw)
    counts = check_live(outputs, world.full, world.snapshots[app], world.gone_before)
    # the rows gone before the snapshot: every event of theirs it holds is marked (the
    # deletes, key changes and updates of phase one)
    gone_events = [
        r
        for r in world.raw
        if r.value is not None
        and oracle.payload(r.key)["id"] in world.gone_before
        and visible(world.snapshots[app], oracle.payload(r.value)["source"]["txId"])
    ]
    assert counts["gone_stale"] >= len(gone_events) >= 13, (counts, len(gone_events))
    print(f"{engine}: {len(outputs)} outputs, {counts}")


def test_embedded_bootstrap_while_writers_delete_and_re_key(world: World) -> None:
    _check_engine(world, "live-embedded", "embedded")


def test_spark_bootstrap_while_writers_delete_and_re_key(world: World) -> None:
    _check_engine(world, "live-spark", "spark")


def test_a_null_written_to_a_defaulted_column_arrives_as_null(world: World) -> None:
    """The NULLs the bootstrap read and the NULLs the stream ships agree; JsonConverter's own
    default would have shipped the column's default in their place."""
    nulls = replaced = 0
    for ours, theirs in zip(world.raw, world.replacing, strict=True):
        if ours.value is None:
            continue
        after = oracle.payload(ours.value)["after"]
        if after is not None and "note" in after and after["note"] is None:
            nulls += 1
            assert oracle.payload(theirs.value)["after"]["note"] == "dflt"
            replaced += 1
    assert nulls > 10 and replaced == nulls
    # the rows the bootstrap read with a NULL note: their first update's before (the image)
    # says NULL, as the FULL twin's does
    first_update_before = [
        oracle.payload(r.value)["before"]["note"]
        for r in world.full
        if r.value is not None
        and oracle.payload(r.value)["op"] == "u"
        and oracle.payload(r.value)["before"]["id"] % 3 == 0
    ]
    assert None in first_update_before and "dflt" not in first_update_before
