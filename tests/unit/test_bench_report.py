"""The bench's table (bench/report.py) and its ratios (bench/throughput.py): the Spark engine's
row is set against the Spark copy, the columns before the new one keep their places."""

from __future__ import annotations

from dataclasses import asdict

from bench.machine import describe, machine_facts
from bench.report import COLUMNS, row
from bench.throughput import Result, _ratios


def test_the_spark_row_gets_its_ratio_to_the_spark_copy() -> None:
    results = [
        Result("copy", "copy", events_per_s=40_000),
        Result("spark-copy", "Spark copy", events_per_s=4_000),
        Result("spark", "Spark engine", events_per_s=1_000),
        Result("embedded", "embedded", events_per_s=6_000),
    ]
    _ratios(results)
    by_key = {r.key: r for r in results}
    assert by_key["spark"].ratio_to_spark_copy == 0.25
    assert by_key["spark"].ratio_to_copy == 0.03
    assert by_key["embedded"].ratio_to_spark_copy is None
    assert by_key["spark-copy"].ratio_to_spark_copy is None


def test_every_row_has_every_column_and_the_old_ones_stay_in_place() -> None:
    assert COLUMNS[:8] == (
        "runner",
        "events/s",
        "ratio to copy",
        "ratio to Quix EOS",
        "CPU µs/event",
        "peak RSS MB",
        "state B/event",
        "output check",
    )
    assert COLUMNS[8:] == ("ratio to Spark copy", "broker CPU µs/event")
    ok = asdict(
        Result(
            "spark",
            "Spark engine",
            events_per_s=1_000,
            ratio_to_spark_copy=0.25,
            broker_cpu_us_per_event=42.0,
        )
    )
    ok["output_check"] = "ok"
    cells = row(ok)
    assert len(cells) == len(COLUMNS)
    assert cells[1] == "1,000" and cells[7] == "ok" and cells[8] == "0.25" and cells[9] == "42"
    failed = asdict(Result("spark-copy", "Spark copy", status="failed: exit 1"))
    assert len(row(failed)) == len(COLUMNS)


def test_the_machine_line_gives_the_python_speed_runs_are_compared_by() -> None:
    machine = machine_facts()
    assert machine["python_loop_mops"] > 0
    line = describe(machine)
    assert line.startswith(f"{machine['cpus']} CPUs, load average at start ")
    assert line.endswith(f"Python speed {machine['python_loop_mops']} M loop steps/s")
