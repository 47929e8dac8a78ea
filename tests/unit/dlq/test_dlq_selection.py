"""Which dead letters a replay takes (hydrator/dlq/selection.py), the goal it keeps with its
offsets (hydrator/dlq/topic.py), the command the exit-65 line names (hydrator/dlq/command.py)
and the command line's checks."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from hydrator.cli import cli
from hydrator.cli.dlq_commands import REPLAY_SECTIONS
from hydrator.config import RunConfig
from hydrator.core.records import DeadLetter
from hydrator.core.settings import HydrationSettings, OnStale
from hydrator.dlq.command import replay_command
from hydrator.dlq.letters import Letter, Unreplayable
from hydrator.dlq.selection import Leave, OffsetRange, Replay, Selection, judge, parse_moment
from hydrator.dlq.topic import goal_metadata, goal_of
from hydrator.events import RawRecord
from hydrator.kafka.client_config import ClientSettings
from hydrator.metrics.dead_letter_ratio import too_many_dead_letters
from hydrator.topology.emit import leaving

APP = "app"
NOW_MS = 1_780_000_000_000


def letter(
    topic: str = "orders",
    partition: int = 0,
    offset: int = 10,
    error: str = "cockroachdb: InvalidKey: key is a JSON object",
    at_ms: int = NOW_MS,
) -> Letter:
    record = RawRecord(topic, partition, offset, b"k", b"v")
    return Letter(record, error, error.rsplit(": ", 1)[0], at_ms)


# -- offset ranges and moments --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100-200", OffsetRange(None, 100, 200)),
        ("3:100-200", OffsetRange(3, 100, 200)),
        ("100-", OffsetRange(None, 100, None)),
        ("-200", OffsetRange(None, None, 200)),
        ("150", OffsetRange(None, 150, 150)),
        ("2:150", OffsetRange(2, 150, 150)),
        (" 0 : 5 - 9 ", OffsetRange(0, 5, 9)),
    ],
)
def test_offset_ranges(text: str, expected: OffsetRange) -> None:
    assert OffsetRange.parse(text) == expected
    assert OffsetRange.parse(str(expected)) == expected


@pytest.mark.parametrize("text", ["", "-", "a-b", "200-100", "1:2:3", "3:"])
def test_offset_ranges_that_are_not(text: str) -> None:
    with pytest.raises(ValueError):
        OffsetRange.parse(text)


def test_an_offset_range_holds_its_ends_and_its_partition_only() -> None:
    both = OffsetRange(1, 100, 200)
    assert both.holds(1, 100) and both.holds(1, 200)
    assert not both.holds(1, 99) and not both.holds(1, 201) and not both.holds(0, 150)
    assert OffsetRange(None, None, 5).holds(7, 0)


def test_moments_are_iso_times_or_durations_before_now() -> None:
    assert parse_moment("2h", NOW_MS) == NOW_MS - 2 * 3_600_000
    assert parse_moment("90m", NOW_MS) == NOW_MS - 90 * 60_000
    utc = parse_moment("2026-05-01T10:00:00Z", NOW_MS)
    assert parse_moment("2026-05-01T10:00:00", NOW_MS) == utc  # UTC unless an offset is named
    assert parse_moment("2026-05-01T12:00:00+02:00", NOW_MS) == utc
    assert parse_moment("2026-05-01", NOW_MS) == utc - 10 * 3_600_000
    with pytest.raises(ValueError, match="not a time"):
        parse_moment("yesterday", NOW_MS)


# -- the selection --------------------------------------------------------------------------------


def test_no_filter_admits_everything() -> None:
    assert Selection().everything and Selection().admits(letter())
    assert Selection().describe() == "every dead letter"


def test_each_filter() -> None:
    assert Selection(source_topics=frozenset({"orders"})).admits(letter())
    assert not Selection(source_topics=frozenset({"users"})).admits(letter())
    assert Selection(error_kinds=("cockroachdb",)).admits(letter())
    assert Selection(error_kinds=("debezium", "cockroachdb: Invalid")).admits(letter())
    assert not Selection(error_kinds=("debezium",)).admits(letter())
    assert Selection(since_ms=NOW_MS).admits(letter())  # from, included
    assert not Selection(since_ms=NOW_MS + 1).admits(letter())
    assert not Selection(until_ms=NOW_MS).admits(letter())  # before, not included
    assert Selection(until_ms=NOW_MS + 1).admits(letter())
    assert Selection(source_offsets=(OffsetRange(0, 5, 10),)).admits(letter())
    assert not Selection(source_offsets=(OffsetRange(1, 5, 10),)).admits(letter())
    assert Selection(source_offsets=(OffsetRange(1), OffsetRange(0, 10))).admits(letter())


def test_the_filters_hold_together() -> None:
    both = Selection(frozenset({"orders"}), ("debezium",))
    assert not both.admits(letter())
    assert both.admits(letter(error="debezium: BadInput: x"))
    assert not both.admits(letter(topic="users", error="debezium: BadInput: x"))
    shown = Selection(frozenset({"orders"}), ("debezium",), NOW_MS, None, (OffsetRange(0, 1),))
    assert shown.describe() == (
        "dead letters of orders; whose error starts with 'debezium'; dead-lettered from "
        "2026-05-28T20:26:40+00:00; at source offsets 0:1-"
    )


def _dead(record: RawRecord, reason: str) -> RawRecord:
    out = leaving(DeadLetter(record, reason).to_output())
    return RawRecord(f"{APP}-dlq", out.partition, 3, out.key, out.value, out.headers, NOW_MS)


def test_judged_replay_leave_or_unreplayable() -> None:
    inputs = ["orders", "users"]
    orders = _dead(RawRecord("orders", 1, 9, b"k", b"v"), "debezium: BadInput: x")
    verdict = judge(orders, Selection(), inputs, APP, 2)
    assert isinstance(verdict, Replay) and verdict.letter.original.source == "orders:1:9"
    assert (verdict.topic, verdict.kind) == ("orders", "debezium: BadInput")
    left = judge(orders, Selection(source_topics=frozenset({"users"})), inputs, APP, 2)
    assert isinstance(left, Leave) and "filters" in left.why
    other = _dead(RawRecord("invoices", 0, 9, b"k", b"v"), "x: Y: z")
    left = judge(other, Selection(), inputs, APP, 2)
    assert isinstance(left, Leave) and "--input-topic" in left.why
    handoff = _dead(RawRecord(f"{APP}-handoff", 0, 1, b"k", b"v"), "unreadable handoff: x")
    assert isinstance(judge(handoff, Selection(), inputs, APP, 2), Unreplayable)


# -- the goal kept with the offsets ---------------------------------------------------------------


def test_the_goal_reads_back_and_anything_else_is_no_goal() -> None:
    assert goal_of(goal_metadata(1234)) == 1234
    assert goal_of(goal_metadata(None)) is None and goal_metadata(None) == ""
    for other in (None, "", "x", "[]", '{"hydrator.dlq-replay.goal": "5"}', '{"a": 1}', "-1"):
        assert goal_of(other) is None


# -- the command the exit-65 line names -----------------------------------------------------------


STATE_DIR = Path("/var/lib/hydrator state")


def _config(**changes: object) -> RunConfig:
    config = RunConfig(
        kafka=ClientSettings("kafka:9092"),
        input_topics=("db.public.orders", "db.public.users"),
        output_suffix=".enriched",
        application_id="orders-app",
        format="cockroachdb",
    )
    return replace(config, **changes)  # type: ignore[arg-type]


def test_the_replay_command_is_the_run_s_with_the_format_told_from_each_record() -> None:
    command = replay_command(_config(), STATE_DIR)
    assert shlex.split(command) == [
        "hydrator", "dlq", "replay", "--bootstrap-servers", "kafka:9092",
        "--application-id", "orders-app", "--state-dir", "/var/lib/hydrator state",
        "--input-topic", "db.public.orders", "--input-topic", "db.public.users",
        "--output-suffix", ".enriched", "--format", "auto",
    ]  # fmt: skip
    assert "--output-topic out" in replay_command(
        _config(output_suffix=None, output_topic="out"), STATE_DIR
    )


def test_the_replay_command_says_when_the_run_had_other_options_it_leaves_out() -> None:
    for config in (
        _config(kafka=ClientSettings("kafka:9092", {"security.protocol": "SASL_SSL"})),
        _config(hydration=HydrationSettings(on_stale=OnStale.FORWARD)),
    ):
        command = replay_command(config, STATE_DIR)
        assert command.endswith(" (with this run's other options)")
        assert "SASL_SSL" not in command


def test_the_exit_65_line_names_the_command() -> None:
    line = too_many_dead_letters(87, 87, 0.5, replay_command(_config(), STATE_DIR))
    assert line is not None and "\n" not in line
    assert "once the cause is fixed, replay them: hydrator dlq replay --bootstrap-servers" in line
    assert line.endswith("--format auto (exit 65)")


# -- the command line -----------------------------------------------------------------------------


REPLAY = cli.commands["dlq"].commands["replay"]  # type: ignore[attr-defined]
ARGS = ["dlq", "replay", "--bootstrap-servers", "kafka:9092", "--input-topic", "orders"]


def test_every_option_of_replay_says_what_it_does_in_one_section() -> None:
    named = [name for _, names in REPLAY_SECTIONS for name in names]
    options = [p for p in REPLAY.params if p.name != "help"]
    assert len(named) == len(set(named))
    assert set(named) == {p.name for p in options}
    assert all(p.help and len(p.help) > 15 for p in options)


def test_the_spark_engine_is_refused_with_how_to_replay() -> None:
    done = CliRunner().invoke(cli, [*ARGS, "--output-suffix", ".out", "--engine", "spark"])
    assert done.exit_code == 2, done.output
    assert "--engine spark" in done.output and "checkpoint" in done.output
    assert "--engine embedded" in done.output and "input topic" in done.output


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--source-topic", "ordres"], "ordres is not one of --input-topic (orders) (did you "
         "mean orders?)"),
        (["--source-offsets", "9-1"], "the range ends before it starts"),
        (["--since", "last week"], "not a time like"),
    ],
)  # fmt: skip
def test_a_bad_filter_is_a_usage_error(extra: list[str], said: str) -> None:
    done = CliRunner().invoke(cli, [*ARGS, "--output-suffix", ".out", *extra], terminal_width=200)
    assert done.exit_code == 2, done.output
    assert said in " ".join(done.output.split()), done.output
