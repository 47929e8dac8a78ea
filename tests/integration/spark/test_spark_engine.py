"""`hydrator run --engine spark` end to end: the real-Debezium oracle, and a killed query resumed
from its checkpoint (at-least-once; duplicates carry their `hydrator.source`)."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from hydrator.formats.keys import canonical_key
from hydrator.topology.layout import internal_topic
from tests.harness import oracle
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.exactly_once import identical_repeats
from tests.harness.hydrator_process import HydratorProcess, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.postgres import PgDatabase
from tests.harness.replays import check_replayed
from tests.harness.spark_kafka import on_connector
from tests.harness.topics import (
    Consumed,
    create_topic,
    end_offsets,
    produce,
    read_topic,
    topic_exists,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
SPARK_TIMEOUT_S = 400


def spark_args(
    bootstrap: str, app: str, inputs: list[str], state_dir: Path, *extra: str
) -> list[str]:
    args = [
        "run",
        "--engine",
        "spark",
        "--master",
        "local[2]",
        "--bootstrap-servers",
        bootstrap,
        "--application-id",
        app,
        "--state-dir",
        str(state_dir),
        "--progress-interval",
        "5s",
        "--output-suffix",
        ".hydrated",
    ]
    for topic in inputs:
        args += ["--input-topic", topic]
    return [*args, *extra]


@pytest.fixture(scope="module")
def twins(
    debezium_jvm: None, kafka_broker: Broker, postgres_module: PgDatabase
) -> dict[bool, oracle.TwinCapture]:
    workload = oracle.generate_workload(seed=11, operations=120)
    return oracle.capture_twins_envelopes(
        postgres_module,
        kafka_broker.bootstrap_servers,
        workload,
        f"spark_{uuid.uuid4().hex[:6]}",
        envelopes=(True, False),
        partitions=PARTITIONS,
    )


def test_real_debezium_oracle_through_the_spark_engine(
    twins: dict[bool, oracle.TwinCapture], kafka_broker: Broker, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    inputs = [twins[True].default_topic, twins[False].default_topic]
    crossing = _key_changes_across_partitions(twins[False].default)
    assert crossing, "the workload must move keys across partitions"

    done = run_to_completion(
        spark_args(
            bootstrap, f"oracle-{uuid.uuid4().hex[:6]}", inputs, tmp_path, "--available-now"
        ),
        timeout_s=SPARK_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    # on Spark's Kafka connector when the tests have its jars (tests/harness/spark_kafka.py)
    kafka_io = "Spark's Kafka connector" if on_connector() else "Python Kafka source"
    assert f"Kafka I/O: {kafka_io}" in done.stderr

    for schemas, capture in twins.items():
        hydrated = oracle.consume_all(
            bootstrap, f"{capture.default_topic}.hydrated", expected=len(capture.default)
        )
        assert len(hydrated) == len(capture.default), schemas
        for out in hydrated:
            source = out.header(HEADER_SOURCE).decode()
            topic, partition, _ = source.rsplit(":", 2)
            assert topic == capture.default_topic and int(partition) == out.partition
        mismatches = oracle.compare(
            oracle.events_by_key(oracle.captured_triples(hydrated)),
            oracle.events_by_key(oracle.captured_triples(capture.full)),
        )
        assert not mismatches, f"schemas={schemas}: {oracle.report(mismatches)}"
        changed, compared = oracle.changed_mismatches(hydrated, capture.full)
        assert not changed, f"schemas={schemas} hydrator.changed: {oracle.report(changed)}"
        assert compared == sum(1 for r in capture.full if r.value is not None)
    print(
        f"spark oracle: {sum(len(c.default) for c in twins.values())} events, "
        f"{len(crossing)} key changes across partitions, zero mismatches"
    )


def _key_changes_across_partitions(records: list[oracle.Captured]) -> list[str]:
    partition_of = {canonical_key(r.key): r.partition for r in records if r.key is not None}
    moves = []
    for r in records:
        new_key = r.header("__debezium.newkey")
        moved = new_key is not None and partition_of.get(canonical_key(new_key)) != r.partition
        if r.value is not None and moved:
            moves.append(canonical_key(new_key))
    return moves


@dataclass
class KillAndResume:
    source: str
    output: str
    placed: list[tuple[int, int]]
    outputs: list[Consumed]
    first_by_source: dict[str, bytes | None]
    duplicates: int

    @property
    def missing(self) -> set[str]:
        return {f"{self.source}:{p}:{o}" for p, o in self.placed} - set(self.first_by_source)


def _kill_and_resume(bootstrap: str, name: str, state_dir: Path, batch_limit: int) -> KillAndResume:
    """Run the query, kill it after a third of the outputs, run it again to the end."""
    source = f"{name}.items"
    output = f"{source}.hydrated"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=2500)
    records = list(table.workload(keys=200, updates_per_key=15))
    placed = produce(bootstrap, source, records)
    args = spark_args(
        bootstrap, name, [source], state_dir, "--max-offsets-per-trigger", str(batch_limit)
    )

    with HydratorProcess(args, state_dir.parent / f"{state_dir.name}-first.log") as first:
        _wait_for_outputs(bootstrap, output, len(records) // 3, first)
        first.kill()
    done = run_to_completion([*args, "--available-now"], timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]

    outputs = read_topic(bootstrap, output)
    first_by_source: dict[str, bytes | None] = {}
    for out in outputs:
        src = out.header(HEADER_SOURCE).decode()
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], f"lsn {lsn} wrongly hydrated"
        first_by_source.setdefault(src, out.value)
    # at least once: a repeat is a byte-identical copy (key, value, headers, partition)
    duplicates = identical_repeats(outputs, output)
    duplicates += sum(
        identical_repeats(read_topic(bootstrap, topic), topic)
        for topic in (internal_topic(name, "dlq"), internal_topic(name, "handoff"))
        if topic_exists(bootstrap, topic)
    )
    return KillAndResume(source, output, placed, outputs, first_by_source, duplicates)


def test_killed_query_resumes_from_its_checkpoint(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    batch_limit = 400
    run = _kill_and_resume(bootstrap, unique_name, tmp_path / "state", batch_limit)
    assert not run.missing, _loss_report(kafka_broker, run, tmp_path)
    # only the batch the kill interrupted is written twice
    assert run.duplicates <= batch_limit
    per_key: dict[bytes | None, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for out in run.outputs:
        src = out.header(HEADER_SOURCE).decode()
        if src not in seen:
            seen.add(src)
            per_key[out.key].append(after_of(out.value)[0])
    assert all(lsns == sorted(lsns) for lsns in per_key.values()), "a key's events reordered"
    print(
        f"spark restart: inputs {len(run.placed)}, outputs {len(run.outputs)}, "
        f"duplicates {run.duplicates} (batch limit {batch_limit})"
    )


def _loss_report(broker: Broker, run: KillAndResume, tmp_path: Path) -> str:
    """What a lost record's trail looks like: which micro-batch read it (the checkpoint's offset
    log), and whether a read_uncommitted reader sees more than the read_committed one did."""
    bootstrap = broker.bootstrap_servers
    output, missing, outputs = run.output, run.missing, run.outputs
    lines = [f"lost {len(missing)} records: {sorted(missing, key=_source_order)[:40]}"]
    uncommitted = read_topic(bootstrap, output, isolation="read_uncommitted")
    lines.append(
        f"outputs read_committed {len(outputs)}, read_uncommitted {len(uncommitted)}, "
        f"log ends {end_offsets(bootstrap, output)}"
    )
    seen_uncommitted = {out.header(HEADER_SOURCE).decode() for out in uncommitted}
    lines += [f"output partition {p}: offsets not read {gaps}" for p, gaps in _gaps(uncommitted)]
    lines.append(f"lost but visible read_uncommitted: {len(missing & seen_uncommitted)}")
    for log in sorted(tmp_path.glob("**/offsets/[0-9]*"), key=lambda p: int(p.name))[:6]:
        lines.append(f"{log}: {log.read_text().splitlines()[-1][:300]}")
    for log in sorted(tmp_path.glob("**/commits/[0-9]*"), key=lambda p: int(p.name))[:6]:
        lines.append(f"committed batch {log.name}")
    lines += [f"broker: {line[:400]}" for line in broker.logged_errors()[-20:]]
    return "\n".join(lines)


def _gaps(records: list) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per partition, the offset ranges [first, last] a reader did not get."""
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_partition[r.partition].append(r.offset)
    found = []
    for partition, offsets in sorted(by_partition.items()):
        expected, gaps = 0, []
        for offset in sorted(offsets):
            if offset > expected:
                gaps.append((expected, offset - 1))
            expected = offset + 1
        if gaps:
            found.append((partition, gaps))
    return found


def _source_order(source: str) -> tuple[int, int]:
    _, partition, offset = source.rsplit(":", 2)
    return int(partition), int(offset)


def _wait_for_outputs(
    bootstrap: str, topic: str, at_least: int, process: HydratorProcess, timeout_s: float = 240
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if sum(end_offsets(bootstrap, topic).values()) >= at_least:
                return
        except Exception:
            pass  # the engine creates the output topic when it starts
        assert process.process.poll() is None, process.log
        time.sleep(0.2)
    raise AssertionError(f"fewer than {at_least} outputs after {timeout_s}s:\n{process.log}")


def test_replayed_dead_letters_leave_with_one_source(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """Dead letters of an earlier run replayed into the input, one fixed and one as it was: the
    output and the new dead letter carry one hydrator.source and the old one as
    hydrator.source.original (the embedded engine's run of it: test_embedded_dlq.py)."""
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable()
    key, value, _ = table.insert(7)
    stale = [("trace", b"kept"), (HEADER_ERROR, b"an earlier reason")]
    fixed = (key, value, [*stale, (HEADER_SOURCE, b"earlier:0:1")])
    broken = (key, b"this is not json", [*stale, (HEADER_SOURCE, b"earlier:0:2")])
    good_at, bad_at = produce(bootstrap, source, [fixed, broken])
    args = spark_args(bootstrap, unique_name, [source], tmp_path, "--available-now")
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]

    (out,) = read_topic(bootstrap, f"{source}.hydrated")
    check_replayed(out, f"{source}:{good_at[0]}:{good_at[1]}", b"earlier:0:1", False)
    assert out.header("trace") == b"kept" and after_of(out.value)[1] == table.rows[7]
    (dead,) = read_topic(bootstrap, f"{unique_name}-dlq")
    check_replayed(dead, f"{source}:{bad_at[0]}:{bad_at[1]}", b"earlier:0:2", True)
    assert dead.header(HEADER_ERROR) != b"an earlier reason"


def test_a_missing_input_topic_is_a_configuration_error(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    missing = f"{unique_name}.absent"
    args = spark_args(kafka_broker.bootstrap_servers, unique_name, [missing], tmp_path)
    done = run_to_completion([*args, "--available-now"], timeout_s=120)
    assert done.returncode == 2, done.stderr[-5000:]
    assert f"--input-topic {missing}: the topic does not exist" in done.stderr


def test_on_unresolved_fail_ends_the_run_in_one_line_as_the_embedded_engine_does(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """The worker's UnresolvedColumnsError reaches the driver inside the query's failure text
    (its state, its plan, the worker's traceback): the run says it in one line, exits 1, and
    commits nothing, so the next run meets the same record."""
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, 1)
    table = ToastTable()
    table.rows[2] = {"id": 2, "doc": "never seen", "n": 0}
    produce(bootstrap, source, [table.update(2)])  # its TOAST value is nowhere
    args = spark_args(bootstrap, unique_name, [source], tmp_path)
    done = run_to_completion([*args, "--available-now", "--on-unresolved", "fail"], timeout_s=300)
    assert done.returncode == 1, done.stderr[-5000:]
    reason = f"{source}:0:0: unresolved columns doc (--on-unresolved fail)"
    ours = [line for line in done.stderr.splitlines() if " ERROR hydrator" in line]
    assert len(ours) == 2, ours
    assert ours[0].endswith(f" failed: UnresolvedColumnsError: {reason}"), ours
    assert ours[1].endswith(f" ERROR hydrator: stopping without committing the batch: {reason}")
    assert "Traceback" not in done.stderr.split(" ERROR hydrator.spark: query ")[1]
    assert read_topic(bootstrap, f"{source}.hydrated") == []


def test_sigterm_while_the_session_starts_stops_the_run_cleanly(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, PARTITIONS)
    args = spark_args(bootstrap, unique_name, [source], tmp_path / "state")
    with HydratorProcess(args, tmp_path / "engine.log") as engine:
        engine.wait_for_log(r"Spark master", timeout_s=120)  # before the query starts
        assert engine.terminate(timeout_s=120) == 0, engine.log[-3000:]
    assert "signal 15: stopping the query" in engine.log
