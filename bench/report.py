"""The bench's one markdown table (and the lines under it)."""

from __future__ import annotations

from typing import Any

from bench.machine import describe

NONE = "\u2013"  # an en dash: no figure
COLUMNS = (
    "runner",
    "events/s",
    "ratio to copy",
    "ratio to Quix EOS",
    "CPU µs/event",
    "peak RSS MB",
    "state B/event",
    "output check",
    # last, so that the columns before keep their places
    "ratio to Spark copy",
    "broker CPU µs/event",
)


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return NONE
    return f"{value:,.{digits}f}"


def row(result: dict[str, Any]) -> list[str]:
    if result["status"] != "ok":
        return [
            result["label"],
            result["status"],
            *[NONE] * 5,
            result["output_check"] or NONE,
            NONE,
            NONE,
        ]
    return [
        result["label"],
        _number(result["events_per_s"]),
        _number(result["ratio_to_copy"], 2),
        _number(result["ratio_to_quix_eos"], 2),
        _number(result["cpu_us_per_event"]),
        _number(result["peak_rss_mb"]),
        _number(result["state_bytes_per_event"]),
        result["output_check"],
        _number(result.get("ratio_to_spark_copy"), 2),
        _number(result.get("broker_cpu_us_per_event")),
    ]


def markdown(report: dict[str, Any]) -> str:
    shape, machine = report["workload"], report["machine"]
    lines = [
        f"Workload: {shape['events']:,} Debezium Postgres events over {shape['keys']:,} keys, "
        f"~{shape['row_bytes']:,} B row + {shape['toast_bytes']:,} B TOAST column, "
        f"{shape['placeholder_ratio']:.0%} of updates ship it as the placeholder, "
        f"{shape['partitions']} partitions; broker: {machine['broker']}; "
        f"{describe(machine)}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(row(result)) + " |" for result in report["results"]]
    lines.append("")
    lines.append(
        "events/s and CPU: first to last output record (record timestamps); CPU of the "
        "runner's whole process tree, broker excluded (its own column: the local broker's CPU in "
        "the same window). bench/README.md says how."
    )
    lines += [f"* {note}" for note in report["notes"]]
    for result in report["results"]:
        for example in result["check_examples"]:
            lines.append(f"* {result['key']}: {example}")
        if result["status"].startswith("failed"):
            lines += [f"* {result['key']} log tail:", "```", *result["notes"], "```"]
        else:
            lines += [f"* {note}" for note in result["notes"]]
    return "\n".join(lines)
