"""Poison records amid good events, through both engines against the real broker: each ends in
the DLQ naming the format and its exception, the engine exits 0, the good events are hydrated,
and integers wider than 64 bits come out exactly as they went in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import RawRecord
from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from tests.harness.cdc_events import Record, ToastTable, after_of
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.poison import POISON, wide_row
from tests.harness.topics import Consumed, create_topic, produce, read_topic
from tests.support.hostile_events import hostile_records

pytestmark = pytest.mark.integration

PARTITIONS = 2
SPARK_TIMEOUT_S = 400


def _workload() -> tuple[ToastTable, list[Record], list, list[Record]]:
    """(table, every record in produce order, the wide rows, the good table events)."""
    table = ToastTable(doc_size=500)
    good = list(table.workload(keys=5, updates_per_key=3))
    wide = [wide_row(n, 10_000 + 10 * n) for n in range(3)]
    records: list[Record] = []
    poison = iter(POISON)
    for i, record in enumerate(good):
        records.append(record)
        if i % 2 == 1 and (item := next(poison, None)) is not None:
            records.append((item.key, item.value, [*item.headers, ("trace", b"kept")]))
    assert next(poison, None) is None, "more poison than gaps"
    for row in wide:
        records += row.records
    return table, records, wide, good


def _check(
    bootstrap: str, app: str, source: str, output: str, table: ToastTable, wide: list, good: list
) -> None:
    dead = read_topic(bootstrap, f"{app}-dlq")
    by_value = {p.value: p for p in POISON}
    assert sorted(d.value for d in dead) == sorted(by_value), _reasons(dead)
    for record in dead:
        poison = by_value[record.value]
        assert record.key == poison.key, poison.name  # the original bytes, untouched
        reason = record.header(HEADER_ERROR).decode()
        # the format first (here `auto`, with the format taken or those tried), then the error
        assert re.match(rf"auto \([a-z, ]+\): {poison.error}: ", reason), (poison.name, reason)
        assert record.header("trace") == b"kept"
        assert record.header(HEADER_SOURCE).decode().startswith(f"{source}:")

    outputs = read_topic(bootstrap, output)
    wide_keys = {row.records[0][0] for row in wide}
    table_outputs = [o for o in outputs if o.key not in wide_keys]
    assert len({o.header(HEADER_SOURCE) for o in table_outputs}) == len(good)
    for out in table_outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]
    for row in wide:
        values = [o.value for o in outputs if o.key == row.records[0][0]]
        assert len(set(values)) == 2, values  # the insert as it was, the update hydrated
        assert row.records[0][1] in values
        (update,) = [v for v in values if v != row.records[0][1]]
        for fragment in row.expected:
            assert fragment in update, (fragment, update)


def _args(
    engine: str, bootstrap: str, app: str, source: str, state: Path, output: str
) -> list[str]:
    """`hydrator run --available-now` of either engine, writing to one output topic."""
    args = run_args(bootstrap, app, [source], state, "--available-now", output_topic=output)
    if engine == "spark":
        args[args.index("embedded")] = "spark"
        args += ["--master", "local[2]"]
    return args


def _reasons(dead: list[Consumed]) -> list[str]:
    return [(d.header(HEADER_ERROR) or b"").decode()[:200] for d in dead]


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_poison_records_amid_good_events(
    engine: str, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table, records, wide, good = _workload()
    produce(bootstrap, source, records)
    args = _args(engine, bootstrap, unique_name, source, tmp_path / "state", output)
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]
    _check(bootstrap, unique_name, source, output, table, wide, good)


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_parked_records_over_the_cap_go_to_the_dlq(
    engine: str, kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A key change whose DELETE never comes: its CREATE parks the new key, and the records
    behind it wait too, up to --max-parked-records; the rest are dead letters."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=200)
    table.insert(1)
    _, _, create = table.change_key(1, 2)  # the DELETE and its tombstone are never produced
    updates = [table.update(2) for _ in range(5)]
    produce(bootstrap, source, [create, *updates])
    args = _args(engine, bootstrap, unique_name, source, tmp_path / "state", output)
    args += ["--max-parked-records", "3", "--handoff-timeout", "2s"]
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]
    dead = read_topic(bootstrap, f"{unique_name}-dlq")
    assert [d.value for d in dead] == [u[1] for u in updates[2:]]
    for record in dead:
        assert "parked records of this key over the limit" in record.header(HEADER_ERROR).decode()
    outputs = read_topic(bootstrap, output)
    assert len(outputs) == 3  # the CREATE and two updates, released unresolved at the timeout
    assert all(o.header("hydrator.unresolved") == b"doc" for o in outputs)


@settings(
    max_examples=1,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(cases=st.lists(hostile_records(), min_size=40, max_size=40))
def test_fuzzed_records_do_not_stop_the_embedded_engine(
    cases: list[tuple[RawRecord, int]],
    kafka_broker: Broker,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Forty mutated events, then good ones: the run ends (exit 0), every dead letter is one of
    the inputs, and the good events after the hostile ones are all hydrated."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=300)
    good = list(table.workload(keys=4, updates_per_key=2))
    hostile = [(r.key, r.value, list(r.headers)) for r, _ in cases]
    placed = produce(bootstrap, source, [*hostile, *good])
    args = _args("embedded", bootstrap, unique_name, source, tmp_path / "state", output)
    done = run_to_completion([*args, "--handoff-timeout", "1s"])
    assert done.returncode == 0, done.stderr[-5000:]
    sources = [f"{source}:{p}:{o}".encode() for p, o in placed]
    dead = read_topic(bootstrap, f"{unique_name}-dlq")
    assert {d.header(HEADER_SOURCE) for d in dead} <= set(sources[: len(hostile)])
    good_sources = set(sources[len(hostile) :])
    hydrated = [o for o in read_topic(bootstrap, output) if o.header(HEADER_SOURCE) in good_sources]
    assert len(hydrated) == len(good)
    for out in hydrated:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]
