"""The bench's table (bench/report.py) and its ratios: the engine against the peer at equal
processes and against the copy, the Spark engine against the Spark copy."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from bench.machine import describe, machine_facts
from bench.report import COLUMNS, GoalRatio, goal_ratios, markdown, row, system_cpu_ratios
from bench.runners import Plan, quix_runner
from bench.throughput import Result, _ratios

W1 = "events/s, --workers 1 / Quix EOS one instance, compressing"


def _rows() -> list[Result]:
    return [
        Result("copy", "copy", events_per_s=40_000, cpu_us_per_event=7.0),
        Result("quix-eos", "Quix 1", events_per_s=10_000, cpu_us_per_event=100.0),
        Result("quix-eos-2", "Quix 2", events_per_s=12_000, cpu_us_per_event=120.0),
        Result("quix-eos-lz4", "Quix 1 lz4", events_per_s=10_000, cpu_us_per_event=80.0),
        Result("embedded", "default", events_per_s=30_000, cpu_us_per_event=60.0),
        Result("embedded-w1", "w1", events_per_s=14_000, cpu_us_per_event=50.0),
        Result("spark-copy", "Spark copy", events_per_s=4_000),
        Result("spark", "Spark engine", events_per_s=1_000),
    ]


def test_the_spark_row_gets_its_ratio_to_the_spark_copy() -> None:
    results = _rows()
    _ratios(results)
    by_key = {r.key: r for r in results}
    assert by_key["spark"].ratio_to_spark_copy == 0.25
    assert by_key["spark"].ratio_to_copy == 0.03
    assert by_key["embedded"].ratio_to_spark_copy is None
    assert by_key["copy"].ratio_to_copy == 1.0


def test_the_ratios_are_taken_at_equal_processes() -> None:
    ratios = {g.name: g for g in goal_ratios([asdict(r) for r in _rows()])}
    w1 = ratios["events/s, --workers 1 / Quix EOS one instance, compressing"]
    assert (w1.value, w1.met) == (1.4, True)  # 14k against Quix with lz4, 10k
    cpu_w1 = ratios["CPU µs/event, --workers 1 / Quix EOS one instance, compressing"]
    assert (cpu_w1.value, cpu_w1.met) == (0.62, True)  # 50 against 80
    default = ratios[
        "events/s, default workers / the better Quix EOS at its defaults (one or two instances)"
    ]
    assert (default.value, default.met) == (2.5, True)  # 30k against the better, 12k
    copy = ratios["events/s, default workers / the copy limit"]
    assert (copy.value, copy.met) == (0.75, True)
    # at Quix's defaults, shown and no goal
    cpu_default = ratios["CPU µs/event, default workers / Quix EOS two instances"]
    assert (cpu_default.value, cpu_default.met) == (0.5, None)


def test_a_ratio_without_its_runner_is_not_measured_and_a_failed_runner_does_not_count() -> None:
    rows = [asdict(r) for r in _rows() if r.key != "quix-eos-2"]
    rows[2]["status"] = "failed: exit 1"  # Quix one instance with lz4
    ratios = {g.name: g for g in goal_ratios(rows)}
    w1 = ratios["events/s, --workers 1 / Quix EOS one instance, compressing"]
    assert (w1.value, w1.met) == (None, None)
    assert ratios["CPU µs/event, default workers / Quix EOS two instances"].value is None
    default = ratios[
        "events/s, default workers / the better Quix EOS at its defaults (one or two instances)"
    ]
    assert default.value == 3.0  # one instance at its defaults ran


def test_the_system_view_adds_each_runners_broker_cpu() -> None:
    rows = [asdict(r) for r in _rows()]
    brokers = {"quix-eos": 200.0, "quix-eos-2": 180.0, "embedded": 50.0, "embedded-w1": 50.0}
    for result in rows:
        result["broker_cpu_us_per_event"] = brokers.get(result["key"])
    w1 = "CPU µs/event with the broker's, --workers 1 / Quix EOS one instance"
    default = "CPU µs/event with the broker's, default workers / Quix EOS two instances"
    ratios = {g.name: g.value for g in system_cpu_ratios(rows)}
    assert ratios[w1] == 0.33  # (50 + 50) / (100 + 200)
    assert ratios[default] == 0.37  # (60 + 50) / (120 + 180)
    rows[1]["broker_cpu_us_per_event"] = None  # a broker not measured (not a local one)
    assert {g.name: g.value for g in system_cpu_ratios(rows)}[w1] is None


def test_a_goal_is_met_on_its_side_of_the_bound() -> None:
    assert GoalRatio("x", 1.3, ">= 1.3").met is True
    assert GoalRatio("x", 1.29, ">= 1.3").met is False
    assert GoalRatio("x", 0.6, "<= 0.6").met is True
    assert GoalRatio("x", 0.61, "<= 0.6").met is False


def test_every_row_has_every_column() -> None:
    ok = asdict(
        Result(
            "spark",
            "Spark engine",
            processes="local[2]",
            events_per_s=1_000,
            ratio_to_spark_copy=0.25,
            broker_cpu_us_per_event=42.0,
            client_cpu_us_per_event=12.5,
        )
    )
    ok["output_check"] = "ok"
    cells = row(ok)
    assert len(cells) == len(COLUMNS)
    assert dict(zip(COLUMNS, cells, strict=True)) == {
        "runner": "Spark engine",
        "processes": "local[2]",
        "events/s": "1,000",
        "CPU µs/event": "\u2013",
        "of which librdkafka threads": "12",
        "ratio to copy": "\u2013",
        "broker CPU µs/event": "42",
        "peak RSS MB": "\u2013",
        "state B/event": "\u2013",
        "state disk B/event": "\u2013",
        "state broker B/event": "\u2013",
        "output check": "ok",
        "ratio to Spark copy": "0.25",
    }
    failed = asdict(Result("spark-copy", "Spark copy", status="failed: exit 1"))
    assert len(row(failed)) == len(COLUMNS)


def _report_of(results: list[Result]) -> dict:
    _ratios(results)
    for r in results:
        r.output_check = "ok"
    return {
        "workload": {
            "events": 100_000,
            "small_events": 25_000,
            "keys": 10_000,
            "row_bytes": 1_000,
            "toast_bytes": 8_000,
            "placeholder_ratio": 0.5,
            "partitions": 4,
        },
        "machine": {
            "cpus": 2,
            "load_average_at_start": [0.1, 0.1, 0.1],
            "python_loop_mops": 30.0,
            "broker": "local",
        },
        "results": [asdict(r) for r in results],
        "notes": [],
    }


def test_the_markdown_names_the_method_and_the_ratios() -> None:
    report = _report_of(_rows())
    text = markdown(report)
    assert "backlogs of 25,000 and 100,000" in text
    assert "(N2 - N1) / (T2 - T1)" in text
    assert (
        "| events/s, --workers 1 / Quix EOS one instance, compressing | 1.40 | >= 1.3 | met |"
        in text
    )
    assert "Python speed 30.0 M loop steps/s" in text
    assert "broker's CPU added" not in text  # no broker measured: no such table
    for result in report["results"]:
        result["broker_cpu_us_per_event"] = 50.0
    assert "| CPU µs/event with the broker's, --workers 1 / Quix EOS one instance | 0.67 |" in (
        markdown(report)
    )


def test_a_rate_lost_in_noise_leaves_its_goal_not_measured_not_gone() -> None:
    noisy = [
        Result("copy", "copy", events_per_s=None, cpu_us_per_event=None),
        Result("embedded", "default", events_per_s=30_000, cpu_us_per_event=60.0),
    ]
    text = markdown(_report_of(noisy))
    assert "| events/s, default workers / the copy limit | \u2013 | >= 0.6 | not measured |" in text
    only_spark = [Result("spark-copy", "Spark copy", events_per_s=4_000)]
    assert "ratio at equal processes" not in markdown(_report_of(only_spark))


def test_the_machine_line_gives_the_python_speed_runs_are_compared_by() -> None:
    machine = machine_facts()
    assert machine["python_loop_mops"] > 0
    line = describe(machine)
    assert line.startswith(f"{machine['cpus']} CPUs, load average at start ")
    assert line.endswith(f"Python speed {machine['python_loop_mops']} M loop steps/s")


def test_the_latency_table_sets_the_engine_p99_against_quix_at_the_same_rate() -> None:
    from bench.latency import _p99_ratio, summary

    def run(p99: float) -> dict:
        return {
            "fed": 1_000,
            "seen": 1_000,
            "feed_rate": 5_000,
            "latency_ms": {"p50": 10.0, "p90": 20.0, "p99": p99, "max": 300.0},
            "rss": {"mb_at_tenths": [1.0] * 11, "growth_pct": 0.0, "peak_mb": 1.0},
        }

    engine, quix = run(200.0), run(400.0)
    engine["to_produce_ms"] = {"p50": 5.0, "p90": 6.0, "p99": 7.0, "max": 8.0}
    assert _p99_ratio(engine, quix) == 0.5
    assert _p99_ratio(engine, run(None)) is None  # type: ignore[arg-type]
    report = {
        "workload": {
            "keys": 100,
            "row_bytes": 500,
            "toast_bytes": 2_000,
            "placeholder_ratio": 0.5,
            "partitions": 4,
        },
        "machine": {"cpus": 2, "load_average_at_start": [0.1], "python_loop_mops": 30.0},
        "rate": 5_000,
        "seconds": 60,
        **engine,
        "quix": quix,
        "p99_ratio_to_quix": 0.5,
    }
    text = summary(report)
    assert (
        "| end-to-end latency p50 / p90 / p99 / max (ms) | 10.0 / 20.0 / 200.0 / 300.0 | " in text
    )
    assert "| p99 ratio, engine / Quix | 0.5 | |" in text
    # only the engine sets its outputs' timestamps itself
    assert "| of which up to the engine's produce() (ms) | 5.0 / 6.0 / 7.0 / 8.0 | - |" in text
    alone = {k: v for k, v in report.items() if k not in ("quix", "p99_ratio_to_quix")}
    assert "Quix" not in summary(alone)


def test_rounds_give_each_runner_the_median_of_its_figures() -> None:
    from bench.throughput import combined

    rounds = [
        Result("embedded", "default", events_per_s=r, cpu_us_per_event=c, output_check="ok")
        for r, c in ((9_000, 150.0), (12_000, 120.0), (10_000, 140.0))
    ]
    rounds[1].peak_rss_mb = 800.0
    result = combined(rounds)
    assert (result.events_per_s, result.cpu_us_per_event) == (10_000, 140.0)
    assert result.peak_rss_mb == 800.0
    assert [x["events_per_s"] for x in result.per_round] == [9_000, 12_000, 10_000]
    assert combined(rounds[:1]) is rounds[0]


def test_a_round_that_failed_or_was_wrong_marks_the_runner() -> None:
    from bench.throughput import combined

    good = Result("embedded", "default", events_per_s=9_000, cpu_us_per_event=1.0)
    good.output_check = "ok"
    failed = Result("embedded", "default", status="failed: exit 1", output_check="ok")
    wrong = Result("embedded", "default", events_per_s=9_000, output_check="WRONG: 3 missing")
    assert combined([good, failed]).status == "failed: exit 1 (round 2)"
    assert combined([good, failed]).events_per_s is None
    assert combined([good, wrong]).output_check == "round 2: WRONG: 3 missing"
    assert combined([failed, good]).status == "failed: exit 1 (round 1)"
    assert combined([wrong, good]).output_check == "round 1: WRONG: 3 missing"
    assert good.per_round == []  # the rounds' figures go to the combined result only


def test_each_ratio_is_the_median_of_the_rounds_ratios() -> None:
    from bench.report import median_ratios

    def round_of(w1_rate: float) -> list[GoalRatio]:
        rows = [asdict(r) for r in _rows()]
        rows[-3]["events_per_s"] = w1_rate  # embedded-w1
        return goal_ratios(rows)

    rounds = [round_of(rate) for rate in (11_000, 14_000, 16_000)]
    merged = {g.name: g for g in median_ratios(rounds)}
    w1 = merged["events/s, --workers 1 / Quix EOS one instance, compressing"]
    assert (w1.value, w1.rounds, w1.met) == (1.4, (1.1, 1.4, 1.6), True)
    assert median_ratios(rounds[:1]) == rounds[0]
    line = markdown(
        _report_of(_rows()) | {"ratios": [asdict(g) for g in merged.values()], "rounds": 3}
    )
    assert f"| {W1} | 1.40 (1.10 / 1.40 / 1.60) |" in line
    assert "Each runner ran 3 rounds" in line


def test_quix_compresses_only_when_told_and_says_so_in_its_row() -> None:
    plan = Plan("broker:9092", "in", "out", "app", Path("/tmp/work"), 1000, 4)
    default = quix_runner("exactly-once", 1, Path("python"), None)
    lz4 = quix_runner("exactly-once", 2, Path("python"), None, "lz4")
    assert "--compression" not in default.command(plan)
    assert "compressed" not in default.label
    command = lz4.command(plan)
    assert command[command.index("--compression") + 1] == "lz4"
    assert lz4.label.endswith("outputs and changelog lz4-compressed")
    assert lz4.key == "quix-eos-2-lz4"  # beside quix-eos-2, Quix at its defaults
