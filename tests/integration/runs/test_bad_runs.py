"""A run that goes wrong says so: `--format cockroachdb` on a Debezium topic with
`--available-now` dead-letters every record, each reason naming the format, and exits 65
with one line saying why; the progress line (text and json) counts filled columns,
unresolved events and dead letters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_ERROR
from hydrator.metrics.dead_letter_ratio import EXIT_TOO_MANY_DEAD_LETTERS
from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import App, run_args, run_to_completion
from tests.harness.topics import produce, read_topic

pytestmark = pytest.mark.integration

# A Debezium topic read as CockroachDB's changefeed: every record is a dead letter.
WRONG_FORMAT = ("--available-now", "--format", "cockroachdb")


def _debezium_topic(app: App) -> int:
    app.create_source(2)
    table = ToastTable(doc_size=2500)
    records = list(table.workload(keys=5, updates_per_key=3))
    produce(app.bootstrap, app.source, records)
    return len(records)


def test_a_wrong_format_dead_letters_everything_and_the_run_fails_in_one_line(app: App) -> None:
    produced = _debezium_topic(app)
    done = run_to_completion(app.run_args(*WRONG_FORMAT, "--workers", "1", output_suffix=".out"))
    assert done.returncode == EXIT_TOO_MANY_DEAD_LETTERS, done.stderr
    said = [line for line in done.stderr.splitlines() if "--max-dlq-ratio" in line]
    assert len(said) == 1, done.stderr
    assert f"{produced} of {produced} records read (100%) went to the dead-letter topic" in said[0]
    assert "Traceback" not in done.stderr

    dead = read_topic(app.bootstrap, app.dlq)
    assert len(dead) == produced
    for record in dead:
        reason = record.header(HEADER_ERROR).decode()
        assert reason.startswith("cockroachdb: InvalidKey: key is a JSON object"), reason


def test_with_several_workers_the_run_s_totals_decide(app: App) -> None:
    produced = _debezium_topic(app)
    args = app.run_args(*WRONG_FORMAT, "--workers", "2", output_suffix=".out")
    done = run_to_completion(args, timeout_s=180)
    assert done.returncode == EXIT_TOO_MANY_DEAD_LETTERS, done.stderr
    said = [line for line in done.stderr.splitlines() if "--max-dlq-ratio" in line]
    assert len(said) == 1, done.stderr
    assert f"{produced} of {produced} records read" in said[0]
    # the supervisor's line names the replay too
    # (tests/integration/operations/test_dlq_replay.py runs it)
    assert f"replay them: hydrator dlq replay --bootstrap-servers {app.bootstrap} " in said[0]
    assert f" --application-id {app.name} " in said[0]


def test_the_progress_line_counts_filled_unresolved_and_dead_letters(
    app: App, tmp_path: Path
) -> None:
    _debezium_topic(app)
    common = ("--available-now", "--workers", "1")
    done = run_to_completion(app.run_args(*common, output_suffix=".out"))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "hydrator.progress:" in line]
    assert lines, done.stderr
    assert "filled columns" in lines[-1] and "unresolved events 0" in lines[-1], lines[-1]
    assert "dead letters 0" in lines[-1]
    filled = int(lines[-1].split("filled columns ")[1].split(",")[0])
    assert filled > 0

    # the same input again, by another application logging json
    again = run_args(
        app.bootstrap,
        f"{app.name}-json",
        [app.source],
        tmp_path / "json-state",
        *common,
        "--log-format",
        "json",
        output_suffix=".json-out",
    )
    done = run_to_completion(again)
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    progress = [e for e in entries if e["logger"] == "hydrator.progress"]
    assert progress, done.stderr
    last = progress[-1]
    assert last["filled_columns"] == filled
    assert last["unresolved_events"] == 0 and last["dead_letters"] == 0


@pytest.mark.parametrize("internal", ["state", "handoff", "dlq"])
def test_an_output_topic_named_like_an_internal_topic_is_refused(app: App, internal: str) -> None:
    app.create_source(1)
    clash = f"{app.name}-{internal}"
    done = run_to_completion(app.run_args("--available-now", "--workers", "1", output_topic=clash))
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '--output-topic': {clash} is the" in done.stderr
    assert "Traceback" not in done.stderr and "CreateTopics" not in done.stderr


def test_spark_fails_a_run_that_dead_letters_too_much_in_one_line(app: App) -> None:
    from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

    produced = _debezium_topic(app)
    args = spark_args(app.bootstrap, app.name, [app.source], app.state_dir, *WRONG_FORMAT)
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == EXIT_TOO_MANY_DEAD_LETTERS, done.stderr[-5000:]
    said = [line for line in done.stderr.splitlines() if "--max-dlq-ratio" in line]
    assert len(said) == 1, done.stderr[-5000:]
    assert f"{produced} of {produced} records read (100%)" in said[0]
    assert "Traceback" not in done.stderr
    (totals,) = [line for line in done.stderr.splitlines() if "hydrator.spark: totals:" in line]
    assert f"dead letters {produced}" in totals and "filled columns 0" in totals
    dead = read_topic(app.bootstrap, app.dlq)
    assert {d.header(HEADER_ERROR).decode().split(":")[0] for d in dead} == {"cockroachdb"}


def test_max_dlq_ratio_0_turns_the_check_off(app: App) -> None:
    produced = _debezium_topic(app)
    args = app.run_args(
        *WRONG_FORMAT, "--workers", "1", "--max-dlq-ratio", "0", output_suffix=".out"
    )
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr
    assert "--max-dlq-ratio" not in done.stderr
    assert len(read_topic(app.bootstrap, app.dlq)) == produced
