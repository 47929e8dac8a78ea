"""`hydrator dlq replay` as an operator runs it, on the test broker (Apache Kafka: the
exactly-once claims are asserted there, tests/harness/exactly_once.py).

A run with the wrong --format dead-letters every record and exits 65, naming the replay
command; that command hydrates every dead letter once, each output keeping its original
hydrator.source and partition; a record that fails again is dead-lettered once more and never
looped; the filters leave the rest for a later replay; --dry-run counts and writes nothing; a
replay killed mid-way and started again loses and repeats nothing; a running application is
not replayed under; replayed events older than their key's state are stale."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from hydrator.kafka.partitioner import partition_for_key
from hydrator.metrics.dead_letter_ratio import EXIT_TOO_MANY_DEAD_LETTERS
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.dlq import committed, printed_replay, replay_args, sources
from tests.harness.exactly_once import repeats
from tests.harness.hydrator_process import App, HydratorProcess, run_to_completion
from tests.harness.kafka import TANSU, Broker
from tests.harness.topics import Consumed, create_topic, end_offsets, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 2
WRONG_FORMAT = ("--available-now", "--format", "cockroachdb", "--workers", "1")
RIGHT_FORMAT = ("--format", "debezium")
OUT = ".out"
GARBAGE = b"this is not JSON"

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _key_changes(table: ToastTable, first: int, count: int) -> list[Record]:
    """`count` rows whose key changes once, to a key in the other partition: the old row
    travels as a handoff."""
    records: list[Record] = []
    for old in range(first, first + count):
        records.append(table.insert(old))
        new = next(
            k
            for k in itertools.count(old * 1000)
            if partition_for_key(key_bytes(k), PARTITIONS)
            != partition_for_key(key_bytes(old), PARTITIONS)
        )
        records += table.change_key(old, new)
        records.append(table.update(new))
    return records


def _source(app: App, topic: str, records: list[Record]) -> dict[str, Record]:
    """Produce `records` to `topic`; each by its source (topic:partition:offset)."""
    placed = produce(app.bootstrap, topic, records)
    return {f"{topic}:{p}:{o}": r for (p, o), r in zip(placed, records, strict=True)}


def _check_outputs(outputs: list[Consumed], produced: dict[str, Record], table: ToastTable) -> None:
    """Every produced record once, at its own partition and key, its row whole."""
    assert sources(outputs) == {source: 1 for source in produced}, "every record exactly once"
    for out in outputs:
        source = out.header(HEADER_SOURCE).decode()
        key, value, _ = produced[source]
        assert (out.partition, out.key) == (int(source.split(":")[1]), key), source
        if value is None:
            assert out.value is None  # a Kafka tombstone passes through
            continue
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], source


def _wrong_format_run(app: App, *extra: str) -> str:
    done = run_to_completion(app.run_args(*WRONG_FORMAT, *extra, output_suffix=OUT))
    assert done.returncode == EXIT_TOO_MANY_DEAD_LETTERS, done.stderr
    return done.stderr


def _replay(app: App, *extra: str, code: int = 0) -> str:
    args = replay_args(app.run_args(*RIGHT_FORMAT, output_suffix=OUT), *extra)
    done = run_to_completion(args, timeout_s=180)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr + done.stdout


def _dry_run(app: App, *extra: str) -> str:
    return _replay(app, "--dry-run", *extra)


def test_the_exit_65_line_names_the_replay_that_hydrates_every_dead_letter_once(
    app: App, kafka_broker: Broker
) -> None:
    create_topic(app.bootstrap, app.source, PARTITIONS)
    table = ToastTable(doc_size=2500)
    produced = _source(
        app, app.source, [*table.workload(keys=6, updates_per_key=3), *_key_changes(table, 50, 3)]
    )

    said = _wrong_format_run(app)
    command = printed_replay(said)
    assert command[:2] == ["dlq", "replay"]
    assert command[command.index("--application-id") + 1] == app.name
    assert command[command.index("--format") + 1] == "auto"
    dead = read_topic(app.bootstrap, app.dlq)
    assert sources(dead) == {source: 1 for source in produced}

    done = run_to_completion(command, timeout_s=180)  # as printed, nothing added
    assert done.returncode == 0, done.stderr
    assert re.search(rf"dlq replay done: {len(produced)} dead letters replayed", done.stderr)
    outputs = read_topic(app.bootstrap, app.source + OUT)
    _check_outputs(outputs, produced, table)
    assert repeats(kafka_broker, outputs, app.source + OUT) == 0
    assert len(read_topic(app.bootstrap, app.dlq)) == len(dead), "nothing dead-lettered again"
    positions = committed(app.bootstrap, app.name, app.dlq, PARTITIONS)
    assert positions == {p: (end, "") for p, end in end_offsets(app.bootstrap, app.dlq).items()}

    # The corrected run has nothing left to read; the outputs stay as they are.
    rerun = run_to_completion(app.run_args("--available-now", *RIGHT_FORMAT, output_suffix=OUT))
    assert rerun.returncode == 0, rerun.stderr
    assert len(read_topic(app.bootstrap, app.source + OUT)) == len(outputs)
    # And a second replay finds nothing.
    again = _replay(app)
    assert "dlq replay done: 0 dead letters replayed" in again


def test_a_record_that_fails_again_is_dead_lettered_once_more_and_never_looped(
    app: App, kafka_broker: Broker
) -> None:
    create_topic(app.bootstrap, app.source, PARTITIONS)
    table = ToastTable(doc_size=2500)
    good = list(table.workload(keys=6, updates_per_key=2))
    bad: list[Record] = [(key_bytes(900 + i), GARBAGE, [("trace", b"t%d" % i)]) for i in range(3)]
    produced = _source(app, app.source, [*good[:5], bad[0], *good[5:12], *bad[1:], *good[12:]])
    bad_sources = {s for s, r in produced.items() if r[1] == GARBAGE}
    _wrong_format_run(app)

    said = _replay(app)
    assert "dlq replay done: 21 dead letters replayed" in said
    assert "3 dead-lettered again" in said
    dead = read_topic(app.bootstrap, app.dlq)
    assert sources(dead) == {s: 2 if s in bad_sources else 1 for s in produced}
    again = [d for d in dead if d.header(HEADER_ERROR).startswith(b"debezium")]
    assert {d.header(HEADER_SOURCE).decode() for d in again} == bad_sources
    for record in again:  # the original bytes and headers, one reason, one source
        assert record.value == GARBAGE
        names = [name for name, _ in record.headers]
        assert names[0] == "trace" and names.count(HEADER_ERROR) == names.count(HEADER_SOURCE) == 1
    outputs = read_topic(app.bootstrap, app.source + OUT)
    _check_outputs(outputs, {s: r for s, r in produced.items() if s not in bad_sources}, table)
    assert repeats(kafka_broker, outputs, app.source + OUT) == 0

    # The next replay takes what failed again, once: it fails once more (all it read: 65).
    assert "would replay 3 (every dead letter)" in _dry_run(app)
    said = _replay(app, code=EXIT_TOO_MANY_DEAD_LETTERS)
    assert "dlq replay done: 3 dead letters replayed" in said and "3 dead-lettered again" in said
    dead = read_topic(app.bootstrap, app.dlq)
    assert sources(dead) == {s: 3 if s in bad_sources else 1 for s in produced}
    assert len(read_topic(app.bootstrap, app.source + OUT)) == len(outputs)


def test_dry_run_counts_by_source_topic_and_error_kind_and_writes_nothing(app: App) -> None:
    other = f"{app.name}.others"
    for topic in (app.source, other):
        create_topic(app.bootstrap, topic, PARTITIONS)
    table = ToastTable(doc_size=100)
    _source(app, app.source, list(table.workload(keys=4, updates_per_key=1)))
    _source(
        app,
        other,
        [*ToastTable(doc_size=100).workload(keys=3, updates_per_key=0), (None, GARBAGE, [])],
    )
    args = ["--input-topic", other]
    _wrong_format_run(app, *args)
    ends = end_offsets(app.bootstrap, app.dlq)

    shown = _dry_run(app, *args, "--source-topic", app.source)
    assert "12 dead letters in" in shown and "nothing written (--dry-run)" in shown
    assert f"would replay 8 (dead letters of {app.source}):" in shown
    assert re.search(rf"\n +8 +{re.escape(app.source)} +cockroachdb: InvalidKey\n", shown), shown
    assert "would leave 4 for a later replay" in shown
    assert re.search(rf"\n +3 +{re.escape(other)} +cockroachdb: InvalidKey\n", shown), shown
    assert re.search(r"\n +1 +" + re.escape(other) + r" +cockroachdb: BadInput\n", shown), shown
    assert "not replayable 0" in shown
    assert end_offsets(app.bootstrap, app.dlq) == ends
    assert read_topic(app.bootstrap, app.source + OUT) == []
    assert committed(app.bootstrap, app.name, app.dlq, PARTITIONS) == {
        0: (-1001, ""),
        1: (-1001, ""),
    }


def test_the_filters_leave_the_other_dead_letters_for_a_later_replay(
    app: App, kafka_broker: Broker
) -> None:
    other = f"{app.name}.others"
    for topic in (app.source, other):
        create_topic(app.bootstrap, topic, PARTITIONS)
    tables = {app.source: ToastTable(doc_size=2500), other: ToastTable(doc_size=2500, seed=3)}
    produced = {
        topic: _source(app, topic, list(table.workload(keys=4, updates_per_key=2)))
        for topic, table in tables.items()
    }
    args = ["--input-topic", other]
    _wrong_format_run(app, *args)

    said = _replay(app, *args, "--source-topic", app.source)
    assert "12 dead letters replayed" in said and "12 left for a later replay" in said
    outputs = read_topic(app.bootstrap, app.source + OUT)
    _check_outputs(outputs, produced[app.source], tables[app.source])
    assert read_topic(app.bootstrap, other + OUT) == []
    # left out: copied to the end as they were (bytes, headers)
    dead = read_topic(app.bootstrap, app.dlq)
    copies = {
        source: [
            (d.key, d.value, d.headers) for d in dead if d.header(HEADER_SOURCE).decode() == source
        ]
        for source in produced[other]
    }
    assert all(len(c) == 2 and c[0] == c[1] for c in copies.values())

    # filters no dead letter passes: all left once more
    said = _replay(app, *args, "--error-kind", "debezium:", "--until", "2000-01-01")
    assert "0 dead letters replayed" in said and "12 left for a later replay" in said
    # the rest, by time and source offsets
    said = _replay(app, *args, "--since", "1h", "--source-offsets", "0-")
    assert "12 dead letters replayed" in said and " 0 left for a later replay" in said
    others = read_topic(app.bootstrap, other + OUT)
    _check_outputs(others, produced[other], tables[other])
    assert repeats(kafka_broker, [*outputs, *others], "outputs") == 0
    assert "would replay 0" in _dry_run(app, *args)


def test_a_replay_killed_mid_way_and_started_again_loses_and_repeats_nothing(
    app: App, kafka_broker: Broker, tmp_path: Path
) -> None:
    if not kafka_broker.honours_transactions:
        pytest.skip("Tansu keeps a killed replay's transaction and drops its goal (docs/tansu.md)")
    create_topic(app.bootstrap, app.source, PARTITIONS)
    table = ToastTable(doc_size=300)
    records: list[Record] = list(table.workload(keys=1500, updates_per_key=8))
    for i in range(0, len(records), 1000):  # some that will fail again, all the way through
        records.insert(i, (key_bytes(100_000 + i), GARBAGE, []))
    produced = _source(app, app.source, records)
    bad_sources = {s for s, r in produced.items() if r[1] == GARBAGE}
    _wrong_format_run(app)

    args = replay_args(
        app.run_args(*RIGHT_FORMAT, "--progress-interval", "200ms", output_suffix=OUT),
        "--commit-interval", "50ms", "--backlog-commit-interval", "50ms",
    )  # fmt: skip
    with HydratorProcess(args, tmp_path / "replay.log") as replay:
        found = replay.wait_for_log(r"records ([1-9]\d*), commits [1-9]", timeout_s=120)
        assert int(found.group(1)) < len(produced), "killed before the end"
        replay.kill()
    done = run_to_completion(args, timeout_s=300)
    assert done.returncode == 0, done.stderr
    assert "the end an unfinished replay set" in done.stderr, done.stderr

    outputs = read_topic(app.bootstrap, app.source + OUT, timeout_s=60)
    _check_outputs(outputs, {s: r for s, r in produced.items() if s not in bad_sources}, table)
    assert repeats(kafka_broker, outputs, app.source + OUT) == 0
    dead = read_topic(app.bootstrap, app.dlq, timeout_s=60)
    assert sources(dead) == {s: 2 if s in bad_sources else 1 for s in produced}


def test_a_running_application_is_not_replayed_under(
    app: App, kafka_broker: Broker, tmp_path: Path
) -> None:
    create_topic(app.bootstrap, app.source, PARTITIONS)
    _source(app, app.source, list(ToastTable(doc_size=100).workload(keys=3, updates_per_key=1)))
    _wrong_format_run(app)
    quick = ("-X", "consumer.session.timeout.ms=2000")  # the replay waits 2 x this + 5 s
    log = tmp_path / "run.log"
    with HydratorProcess(app.run_args(*RIGHT_FORMAT, output_suffix=OUT), log) as running:
        running.wait_until_held({0, 1})
        said = _replay(app, *quick, code=2)  # here: the state directory is the run's
        assert "is in use: a run of the application is running here; stop it" in said
        if kafka_broker.kind != TANSU:  # which lists no group members (docs/tansu.md)
            elsewhere = ("--state-dir", str(tmp_path / "elsewhere"))  # on another machine
            said = _replay(app, *quick, *elsewhere, code=2)
            assert f"--application-id {app.name}: the application is running" in said
        assert running.terminate() == 0
    said = _replay(app, *quick)  # the run's member leaves when its session times out: waited for
    assert "dlq replay done: 6 dead letters replayed" in said


def test_replayed_events_older_than_their_key_s_state_are_stale(app: App, tmp_path: Path) -> None:
    """A dead letter replayed after newer events of its key were hydrated is at or before the
    stored position: dropped (counted), as --on-stale says."""
    create_topic(app.bootstrap, app.source, 1)
    table = ToastTable(doc_size=200)
    records = [table.insert(1), table.update(1)]
    table.doc_size = 5000
    records.append(table.update(1, touch_doc=True))  # too large for --max-record-bytes 4KB
    records += [table.update(1), table.update(1)]
    _source(app, app.source, records)
    run = app.run_args(
        "--available-now", *RIGHT_FORMAT, "--max-record-bytes", "4KB", output_suffix=OUT
    )
    done = run_to_completion(run)
    assert done.returncode == 0, done.stderr
    assert len(read_topic(app.bootstrap, app.dlq)) == 1
    outputs = read_topic(app.bootstrap, app.source + OUT)

    # (on another machine: the state the run wrote, restored from the changelog, is judged by
    # the run's committed offsets)
    said = _replay(app, "--state-dir", str(tmp_path / "elsewhere"))
    assert "1 dead letters replayed (0 events hydrated, 1 stale, 0 dead-lettered again)" in said
    assert read_topic(app.bootstrap, app.source + OUT) == outputs


def test_a_run_after_a_replay_restores_the_state_the_replay_wrote(app: App, tmp_path: Path) -> None:
    """The replay's state changes are in the changelog, judged by the replay's committed
    offsets of the dead-letter topic: a run on another machine (an empty state directory)
    restores them, and fills the next events from them."""
    create_topic(app.bootstrap, app.source, PARTITIONS)
    table = ToastTable(doc_size=2500)
    _source(app, app.source, list(table.workload(keys=6, updates_per_key=1)))
    _wrong_format_run(app)
    _replay(app)
    later = _source(app, app.source, [table.update(key) for key in range(6)])  # placeholders

    elsewhere = ("--state-dir", str(tmp_path / "elsewhere"))
    run = app.run_args("--available-now", *RIGHT_FORMAT, *elsewhere, output_suffix=OUT)
    done = run_to_completion(run)
    assert done.returncode == 0, done.stderr
    assert "never committed" not in done.stderr, done.stderr
    outputs = read_topic(app.bootstrap, app.source + OUT)
    fresh = [o for o in outputs if o.header(HEADER_SOURCE).decode() in later]
    _check_outputs(fresh, later, table)
    assert all(b'"doc":"__debezium' not in (o.value or b"") for o in fresh)
