"""The bench's markdown table, the ratios at equal processes under it, and its notes."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from bench.machine import describe
from bench.marginal import ratio
from bench.runners import QUIX_CODECS

NONE = "\u2013"  # an en dash: no figure
ENGINE_KEYS = ("embedded", "embedded-w1")  # the runners every goal ratio is of
COLUMNS = (
    "runner",
    "processes",
    "events/s",
    "CPU µs/event",
    "of which librdkafka threads",
    "ratio to copy",
    "broker CPU µs/event",
    "peak RSS MB",
    "state B/event",
    "state disk B/event",
    "state broker B/event",
    "output check",
    "ratio to Spark copy",
)


@dataclass(frozen=True)
class GoalRatio:
    """One of the ratios the speed goals are set in, from one run's rows."""

    name: str
    value: float | None
    goal: str  # e.g. ">= 1.3"; empty for a ratio that is no goal
    rounds: tuple[float | None, ...] = ()  # each round's, when value is their median

    @property
    def met(self) -> bool | None:
        if self.value is None or not self.goal:
            return None
        sign, bound = self.goal.split()
        return self.value >= float(bound) if sign == ">=" else self.value <= float(bound)


def median_ratios(rounds: list[list[GoalRatio]]) -> list[GoalRatio]:
    """Each ratio as the median of its value in every round (a round that could not give it
    left out), the rounds' values kept; one round's ratios as they are."""
    if len(rounds) == 1:
        return rounds[0]
    merged = []
    for same in zip(*rounds, strict=True):
        values = tuple(ratio.value for ratio in same)
        known = [value for value in values if value is not None]
        median = round(statistics.median(known), 2) if known else None
        merged.append(GoalRatio(same[0].name, median, same[0].goal, values))
    return merged


def goal_ratios(results: list[dict[str, Any]]) -> list[GoalRatio]:
    """The engine against the peer at equal processes, and against the copy: `--workers 1`
    against one Quix EOS instance compressing as the engine does (like for like), the default
    workers against the better of one and two instances at Quix's defaults (what a user gets
    out of the box)."""
    ok = {x["key"]: x for x in results if x["status"] == "ok"}

    def rate(key: str | None) -> float | None:
        return ok[key]["events_per_s"] if key in ok else None

    def cpu(key: str | None) -> float | None:
        return ok[key]["cpu_us_per_event"] if key in ok else None

    like_for_like = compressed_quix(ok, instances=1)
    quix_rates = [x for x in (rate("quix-eos"), rate("quix-eos-2")) if x is not None]
    better_quix = max(quix_rates) if quix_rates else None
    return [
        GoalRatio(
            "events/s, --workers 1 / Quix EOS one instance, compressing",
            ratio(rate("embedded-w1"), rate(like_for_like)),
            ">= 1.3",
        ),
        GoalRatio(
            "CPU µs/event, --workers 1 / Quix EOS one instance, compressing",
            ratio(cpu("embedded-w1"), cpu(like_for_like)),
            "<= 0.75",
        ),
        GoalRatio(
            "events/s, default workers / the better Quix EOS at its defaults (one or two "
            "instances)",
            ratio(rate("embedded"), better_quix),
            ">= 2.0",
        ),
        GoalRatio(
            "events/s, default workers / the copy limit",
            ratio(rate("embedded"), rate("copy")),
            ">= 0.6",
        ),
        *_cpu_ratios(cpu, "CPU µs/event", ""),
    ]


def compressed_quix(keys: Collection[str], instances: int) -> str | None:
    """The key of the Quix EOS runner of `instances` that compresses (`quix-eos-lz4`,
    `quix-eos-2-lz4`), if one is among `keys`."""
    prefix = "quix-eos-" if instances == 1 else f"quix-eos-{instances}-"
    return next((prefix + codec for codec in QUIX_CODECS if prefix + codec in keys), None)


def system_cpu_ratios(results: list[dict[str, Any]]) -> list[GoalRatio]:
    """The CPU ratios again with the broker's CPU added to each runner's. Not a goal, a second
    view: where the work is done depends on the producer's compression. Quix Streams produces
    with librdkafka's default, none (its `-lz4` runners compress); the engine compresses its
    outputs with lz4, and the broker (and every reader) handles fewer bytes."""
    ok = {x["key"]: x for x in results if x["status"] == "ok"}

    def system(key: str) -> float | None:
        result = ok.get(key)
        if result is None or None in (
            result.get("cpu_us_per_event"),
            result.get("broker_cpu_us_per_event"),
        ):
            return None  # a run without a marginal rate (the large run was no longer)
        return float(result["cpu_us_per_event"]) + float(result["broker_cpu_us_per_event"])

    return _cpu_ratios(system, "CPU µs/event with the broker's", "")


def _cpu_ratios(cost: Callable[[str], float | None], measure: str, goal: str) -> list[GoalRatio]:
    """`measure` (a runner's `cost` by its key) at equal processes: `--workers 1` against one
    Quix EOS instance, default workers against two."""
    return [
        GoalRatio(
            f"{measure}, --workers 1 / Quix EOS one instance",
            ratio(cost("embedded-w1"), cost("quix-eos")),
            goal,
        ),
        GoalRatio(
            f"{measure}, default workers / Quix EOS two instances",
            ratio(cost("embedded"), cost("quix-eos-2")),
            goal,
        ),
    ]


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return NONE
    return f"{value:,.{digits}f}"


def row(result: dict[str, Any]) -> list[str]:
    if result["status"] != "ok":
        return [
            result["label"],
            result.get("processes") or NONE,
            result["status"],
            *[NONE] * 8,
            result["output_check"] or NONE,
            NONE,
        ]
    return [
        result["label"],
        result.get("processes") or NONE,
        _number(result["events_per_s"]),
        _number(result["cpu_us_per_event"]),
        _number(result.get("client_cpu_us_per_event")),
        _number(result["ratio_to_copy"], 2),
        _number(result.get("broker_cpu_us_per_event")),
        _number(result["peak_rss_mb"]),
        _number(result["state_bytes_per_event"]),
        _number(result.get("state_disk_bytes_per_event")),
        _number(result.get("state_broker_bytes_per_event")),
        result["output_check"],
        _number(result.get("ratio_to_spark_copy"), 2),
    ]


def _given(
    stored: list[dict[str, Any]] | None,
    ratios_of: Callable[[list[dict[str, Any]]], list[GoalRatio]],
    results: list[dict[str, Any]],
) -> list[GoalRatio]:
    """The ratios the JSON holds, or those of its results (a report from before they were kept)."""
    if stored is None:
        return ratios_of(results)
    return [
        GoalRatio(x["name"], x["value"], x.get("goal", ""), tuple(x.get("rounds") or ()))
        for x in stored
    ]


def _value(given: GoalRatio) -> str:
    value = _number(given.value, 2)
    if len(given.rounds) > 1 and given.value is not None:
        value += " (" + " / ".join(_number(v, 2) for v in given.rounds) + ")"
    return value


def _verdict(goal: GoalRatio) -> str:
    if not goal.goal:
        return ""  # shown beside the goals, without one
    if goal.met is None:
        return "not measured"
    return "met" if goal.met else "missed"


def markdown(report: dict[str, Any]) -> str:
    shape, machine = report["workload"], report["machine"]
    lines = [
        f"Workload: backlogs of {shape['small_events']:,} and {shape['events']:,} Debezium "
        f"Postgres events over {shape['keys']:,} keys, "
        f"~{shape['row_bytes']:,} B row + {shape['toast_bytes']:,} B TOAST column, "
        f"{shape['placeholder_ratio']:.0%} of updates ship it as the placeholder, "
        f"{shape['partitions']} partitions; broker: {machine['broker']}; "
        f"{describe(machine)}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(row(result)) + " |" for result in report["results"]]
    lines += [
        "",
        "events/s and CPU µs/event are marginal: each runner drained the small and the large "
        "backlog, events/s = (N2 - N1) / (T2 - T1) with T the wall time from its process's "
        "start to its exit with every output committed, CPU µs/event = (C2 - C1) / (N2 - N1) "
        "with C its process tree's CPU (children included); the broker's CPU likewise, and "
        "the part of C spent in librdkafka's own threads (compressing, sending, fetching; "
        "sampled). The bare core runs in the bench's process (no start-up to cancel). "
        "bench/README.md says how.",
    ]
    ratios = _given(report.get("ratios"), goal_ratios, report["results"])
    # the goals are the embedded engine's: shown whenever it ran, a ratio its run could not
    # give (a rate lost in noise) as not measured; not when only Spark ran, say
    engine_ran = any(x["key"] in ENGINE_KEYS for x in report["results"])
    if engine_ran or any(given.value is not None for given in ratios):
        lines += ["", "| ratio at equal processes | value | goal | |", "|---|---|---|---|"]
        for given in ratios:
            lines.append(f"| {given.name} | {_value(given)} | {given.goal} | {_verdict(given)} |")
    system = _given(report.get("system_ratios"), system_cpu_ratios, report["results"])
    if any(given.value is not None for given in system):
        lines += [
            "",
            "| the same with the broker's CPU added (not a goal: where compression runs) | value |",
            "|---|---|",
            *[f"| {given.name} | {_value(given)} |" for given in system],
        ]
    if report.get("rounds", 1) > 1:
        lines += [
            "",
            f"Each runner ran {report['rounds']} rounds (every other round in reverse order); "
            "its figures are the rounds' medians, each ratio the median of the rounds' ratios "
            "(each round's in brackets).",
        ]
    lines.append("")
    lines += [f"* {note}" for note in report["notes"]]
    for result in report["results"]:
        for example in result["check_examples"]:
            lines.append(f"* {result['key']}: {example}")
        if result["status"].startswith("failed"):
            lines += [f"* {result['key']} log tail:", "```", *result["notes"], "```"]
        else:
            lines += [f"* {note}" for note in result["notes"]]
    return "\n".join(lines)
