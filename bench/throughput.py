"""`python -m bench`: every runner, one after another, timed marginally on two pre-loaded
backlogs of one workload.

How each figure is taken (also in bench/README.md):
* Each runner drains a small and a large backlog of the same workload (the small one the large
  one's first events: the same keys), each into an output topic of its own, as its own process
  tree. T is the wall time from starting the process to its exit, every output committed (the
  output check reads them read_committed afterwards); C is the CPU time (user + system) of the
  process tree, every descendant included (psutil's children times of the bench's process,
  taken around the run: exact for every process that is waited for; the tree sampled every
  100 ms, should that see more, for one that is not).
* events/s = (N2 - N1) / (T2 - T1); CPU µs/event = (C2 - C1) / (N2 - N1). Start-up, group
  joins, restore, the final commit and any idle wait before stopping cancel, and every runner
  is timed by the same clock.
* broker CPU µs/event: the local Tansu broker's CPU over each run, likewise marginal. Not taken
  with --bootstrap-servers.
* peak RSS: the largest sum of resident memory over the process tree at a 100 ms sample, in
  the large run.
* state B/event: bytes (key + value) written to the runner's changelog topics, or the growth
  of its checkpoint state directory (Spark), per event, in the large run.
* state disk B/event and state broker B/event: state as a user pays for it
  (bench/state_bytes.py): the local stores' files as the large run left them, and what the
  broker keeps of its changelog once compacted, in the codec the broker keeps it in.
* output check: a read_committed reader counts each run's output and checks every record
  against the workload's truth: `doc` filled with the row's value, `before` the previous row.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import psutil
from tqdm import tqdm

from bench import runners as r
from bench.broker import (
    QUIX_RETENTION_NOTE,
    Broker,
    BrokerChoice,
    broker,
    create_topics,
    delete_topics,
)
from bench.broker import preload as preload_topic
from bench.machine import machine_facts
from bench.marginal import Timing, marginal, ratio
from bench.measure import OutputWatch, TreeSampler, directory_bytes, scan_topic, topics_named
from bench.quix_venv import quix_python
from bench.report import GoalRatio, goal_ratios, median_ratios, system_cpu_ratios
from bench.result import Result
from bench.runners import REPO, runner_env
from bench.state_bytes import compacted_changelog_bytes, disk_bytes
from bench.workload import Checker, Verdict, Workload, WorkloadShape


@dataclass(frozen=True)
class Options:
    shape: WorkloadShape  # the large backlog
    small_events: int  # the small backlog: the large one's first events
    partitions: int
    broker: BrokerChoice
    selected: tuple[str, ...]  # runner keys; empty: all
    skip_spark: bool
    spark_batch: int
    quix_venv: Path
    runner_timeout_s: float
    keep_topics: bool
    engine_args: tuple[str, ...]
    rounds: int = 1  # each runner's pair of runs, this often; figures are the rounds' medians
    quix_compression: str = "lz4"  # the like-for-like Quix runners' producer compression.type
    # Spark's Kafka connector's jars, comma-separated (None: its runners cannot run)
    spark_kafka_jars: str | None = None


@dataclass(frozen=True)
class Backlog:
    """One pre-loaded input topic and the workload whose truth checks its outputs."""

    topic: str
    workload: Workload

    @property
    def events(self) -> int:
        return self.workload.shape.events


def all_runners(options: Options, work: Path) -> list[r.Runner]:
    wanted = set(options.selected)
    take = (lambda key: key in wanted) if wanted else (lambda key: True)
    has_workers = "--workers" in r.engine_help()
    quix_path: Path | None = None
    quix_problem: str | None = None
    if any(take(key) for key in r.QUIX_KEYS):
        try:
            quix_path = quix_python(options.quix_venv, work / "quix-venv.log")
        except (RuntimeError, OSError) as exc:
            quix_problem = f"n/a (no Quix venv: {exc})"
    candidates = [
        r.copy_runner(),
        r.quix_runner("at-least-once", 1, quix_path, quix_problem),
        r.quix_runner("exactly-once", 1, quix_path, quix_problem),
        r.quix_runner("exactly-once", 2, quix_path, quix_problem),
        # like for like: Quix compressing as the engine does
        r.quix_runner("exactly-once", 1, quix_path, quix_problem, options.quix_compression),
        r.quix_runner("exactly-once", 2, quix_path, quix_problem, options.quix_compression),
        r.embedded_runner(None, has_workers, options.engine_args),
        r.embedded_runner("1", has_workers, options.engine_args),
    ]
    if not options.skip_spark:
        batch, jars = options.spark_batch, options.spark_kafka_jars
        for key in ("spark-copy", "spark-copy-connector", "spark-pass-through"):
            candidates.append(r.spark_copy_runner(batch, key, jars))
        candidates.append(r.spark_runner(batch, options.engine_args))
        candidates.append(r.spark_runner(batch, options.engine_args, "connector", jars))
    return [runner for runner in candidates if take(runner.key)]


def run_bench(options: Options) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="hydrator-bench-"))
    began = time.time()
    machine = machine_facts()
    try:
        with broker(options.broker) as kafka:
            runner_list = all_runners(options, work)
            name = f"bench-{uuid.uuid4().hex[:8]}"
            small_shape = replace(options.shape, events=options.small_events)
            backlogs = (
                Backlog(f"{name}-small.public.customers", Workload(small_shape)),
                Backlog(f"{name}-large.public.customers", Workload(options.shape)),
            )
            preload_s = sum(_preload(kafka, b, options.partitions) for b in backlogs)
            results = []
            if not options.selected or "core" in options.selected:
                from bench.core import core_result

                results.append(core_result(backlogs[1].workload))
            rounds: list[list[Result]] = []
            for number in range(options.rounds):
                # Every other round backwards: a machine whose speed drifts during the bench
                # favours no runner by its place in the order.
                order = runner_list if number % 2 == 0 else runner_list[::-1]
                done = {
                    runner.key: run_twice(kafka, backlogs, runner, options, work)
                    for runner in order
                }
                rounds.append([done[runner.key] for runner in runner_list])
            results += [combined(list(runs)) for runs in zip(*rounds, strict=True)]
            if not options.keep_topics:
                delete_topics(kafka.bootstrap_servers, [b.topic for b in backlogs])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _ratios(results)
    ran_quix = any(x.key.startswith("quix") for x in results)
    notes = [QUIX_RETENTION_NOTE] if ran_quix and "Tansu" in kafka.kind else []
    for runner in runner_list:
        notes.extend(note for note in runner.notes if note not in notes)
    return {
        "machine": machine | {"broker": kafka.kind},
        "workload": {
            **asdict(options.shape),
            "small_events": options.small_events,
            "partitions": options.partitions,
        },
        "method": "marginal",
        "preload_s": round(preload_s, 1),
        "total_s": round(time.time() - began, 1),
        "results": [asdict(x) for x in results],
        "rounds": options.rounds,
        "quix_compression": options.quix_compression,
        "ratios": [asdict(g) | {"met": g.met} for g in across_rounds(goal_ratios, rounds)],
        "system_ratios": [asdict(g) for g in across_rounds(system_cpu_ratios, rounds)],
        "notes": notes,
    }


def _preload(kafka: Broker, backlog: Backlog, partitions: int) -> float:
    create_topics(kafka.bootstrap_servers, [backlog.topic], partitions)
    began = time.monotonic()
    with tqdm(total=backlog.events, desc="pre-load", unit="ev", leave=False) as bar:
        events = ((key, value) for _, key, value in backlog.workload.events())
        preload_topic(kafka.bootstrap_servers, backlog.topic, events, lambda: bar.update(1))
    return time.monotonic() - began


# A runner's bar shows what it did and how fast, no time left: before its outputs flow (Quix
# and Spark take seconds to start, then write a first few) the rate says nothing of the rest,
# and tqdm's estimate from it reads as hours.
NO_ETA_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}]"


@dataclass
class Run:
    """What one run of a runner over one backlog gave."""

    timing: Timing
    status: str
    exit_code: int | None
    verdict: Verdict
    peak_rss_mb: float
    state_bytes: int
    disk_bytes: int | None = None  # None: the runner keeps no local store
    broker_bytes: int | None = None  # None: nor a changelog
    log_tail: str = ""


def run_twice(
    kafka: Broker,
    backlogs: tuple[Backlog, Backlog],
    runner: r.Runner,
    options: Options,
    work: Path,
) -> Result:
    result = Result(runner.key, runner.label, processes=runner.processes)
    if runner.unavailable:
        result.status = runner.unavailable
        return result
    small = run_one(kafka, backlogs[0], runner, options, work)
    large = run_one(kafka, backlogs[1], runner, options, work)
    result.rate_method = "marginal: small and large backlog, process start to exit"
    result.runs = [
        {**asdict(run.timing), "status": run.status, "output_check": run.verdict.summary()}
        for run in (small, large)
    ]
    result.exit_code = large.exit_code if small.exit_code in (0, None) else small.exit_code
    for which, run in (("small", small), ("large", large)):
        if run.status != "ok" and result.status == "ok":
            result.status = f"{run.status} ({which} run)"
            result.notes.append(run.log_tail)
    checks = [(which, run.verdict) for which, run in (("small", small), ("large", large))]
    wrong = [(which, v) for which, v in checks if not v.summary().startswith("ok")]
    count_only = "" if runner.hydrates else " (count only)"
    if wrong:
        result.output_check = "; ".join(f"{w} run {v.summary()}" for w, v in wrong) + count_only
    else:
        result.output_check = large.verdict.summary() + count_only
    result.check_examples = [e for _, v in checks for e in v.examples][:5]
    result.output_records = large.verdict.records
    result.peak_rss_mb = large.peak_rss_mb
    result.state_bytes_per_event = round(large.state_bytes / large.timing.events, 1)
    if large.disk_bytes is not None:
        result.state_disk_bytes_per_event = round(large.disk_bytes / large.timing.events, 1)
    if large.broker_bytes is not None:
        result.state_broker_bytes_per_event = round(large.broker_bytes / large.timing.events, 1)
    if result.status == "ok":
        figures = marginal(small.timing, large.timing)
        result.events_per_s = figures.events_per_s
        result.cpu_us_per_event = figures.cpu_us_per_event
        result.broker_cpu_us_per_event = figures.broker_cpu_us_per_event
        result.client_cpu_us_per_event = figures.client_cpu_us_per_event
        if figures.problem:
            result.notes.append(f"{runner.key}: {figures.problem}")
    return result


def combined(runs: list[Result]) -> Result:
    """One runner's result over the rounds: its figures the median of the rounds' (the peak
    RSS the largest), failed or wrong when any round was; each round's figures in `per_round`."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    result = replace(first, status="ok", runs=[], per_round=[], notes=[], check_examples=[])
    for number, run in enumerate(runs, start=1):
        result.runs += [{**timing, "round": number} for timing in run.runs]
        result.per_round.append(
            {
                "events_per_s": run.events_per_s,
                "cpu_us_per_event": run.cpu_us_per_event,
                "client_cpu_us_per_event": run.client_cpu_us_per_event,
                "broker_cpu_us_per_event": run.broker_cpu_us_per_event,
                "status": run.status,
                "output_check": run.output_check,
            }
        )
        result.notes += [note for note in run.notes if note not in result.notes]
        result.check_examples += run.check_examples
        if run.status != "ok" and result.status == "ok":
            result.status = f"{run.status} (round {number})"
            result.exit_code = run.exit_code
        if not run.output_check.startswith("ok") and not result.output_check.startswith("round"):
            result.output_check = f"round {number}: {run.output_check}"
    result.check_examples = result.check_examples[:5]
    if result.status != "ok":
        result.events_per_s = result.cpu_us_per_event = result.broker_cpu_us_per_event = None
        result.client_cpu_us_per_event = None
        return result
    result.events_per_s = _median([run.events_per_s for run in runs], 0)
    result.cpu_us_per_event = _median([run.cpu_us_per_event for run in runs], 1)
    result.broker_cpu_us_per_event = _median([run.broker_cpu_us_per_event for run in runs], 1)
    result.client_cpu_us_per_event = _median([run.client_cpu_us_per_event for run in runs], 1)
    result.peak_rss_mb = max((run.peak_rss_mb or 0.0) for run in runs)
    result.state_bytes_per_event = _median([run.state_bytes_per_event for run in runs], 1)
    result.state_disk_bytes_per_event = _median([run.state_disk_bytes_per_event for run in runs], 1)
    result.state_broker_bytes_per_event = _median(
        [run.state_broker_bytes_per_event for run in runs], 1
    )
    return result


def _median(values: list[float | None], digits: int) -> float | None:
    known = [value for value in values if value is not None]
    return round(statistics.median(known), digits) if known else None


def across_rounds(
    ratios_of: Callable[[list[dict[str, Any]]], list[GoalRatio]], rounds: list[list[Result]]
) -> list[GoalRatio]:
    """The ratios of each round (from that round's runs alone), and their medians."""
    return median_ratios([ratios_of([asdict(x) for x in results]) for results in rounds])


def _children_cpu_s() -> float:
    """CPU seconds of every descendant of this process that has exited and been waited for."""
    times = psutil.Process().cpu_times()
    return times.children_user + times.children_system


def _broker_cpu_s(kafka: Broker) -> float | None:
    if kafka.pid is None:
        return None
    try:
        times = psutil.Process(kafka.pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def run_one(kafka: Broker, backlog: Backlog, runner: r.Runner, options: Options, work: Path) -> Run:
    events = backlog.events
    app = f"bench-{runner.key}-{uuid.uuid4().hex[:6]}"
    plan = r.Plan(
        kafka.bootstrap_servers,
        backlog.topic,
        f"{backlog.topic}.{runner.key}",
        app,
        work / app,
        events,
        options.partitions,
    )
    plan.work_dir.mkdir(parents=True)
    create_topics(kafka.bootstrap_servers, [plan.output_topic], options.partitions)
    log_path = plan.work_dir / "runner.log"
    status, exit_code, log_tail = "ok", None, ""
    broker_before = _broker_cpu_s(kafka)
    with (
        open(log_path, "wb") as log,
        tqdm(
            total=events,
            desc=f"{runner.key} {events:,}",
            unit="ev",
            leave=False,
            bar_format=NO_ETA_BAR,
        ) as bar,
    ):
        watch = OutputWatch(
            kafka.bootstrap_servers,
            plan.output_topic,
            options.partitions,
            lambda n: bar.update(min(n, events) - bar.n),
        ).start()
        cpu_before = _children_cpu_s()
        started = time.monotonic()
        process = subprocess.Popen(
            runner.command(plan), stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=runner_env()
        )
        sampler = TreeSampler(process.pid).start()
        try:
            exit_code = process.wait(timeout=options.runner_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            status = f"failed: no end within {options.runner_timeout_s:.0f} s"
        finally:
            wall_s = time.monotonic() - started
            cpu_s = _children_cpu_s() - cpu_before
            samples = sampler.stop()
            watch.stop()
    # The children times miss a descendant nobody waited for (reparented when its parent
    # exited first); the samples miss each process's last 100 ms. The larger is the nearer.
    cpu_s = max(cpu_s, samples.cpu_s[-1] if samples.cpu_s else 0.0)
    broker_after = _broker_cpu_s(kafka)
    broker_cpu = (
        broker_after - broker_before
        if broker_before is not None and broker_after is not None
        else None
    )
    if exit_code not in (0, None) and status == "ok":
        status = f"failed: exit {exit_code}"
        log_tail = log_path.read_bytes()[-1500:].decode(errors="replace")
    checker = Checker(backlog.workload, runner.hydrates)
    scan_topic(kafka.bootstrap_servers, plan.output_topic, checker.check)
    verdict = checker.finish()
    state_topics = topics_named(kafka.bootstrap_servers, lambda n: runner.state_topic(plan, n))
    state_bytes = sum(
        scan_topic(kafka.bootstrap_servers, t, committed_only=False).bytes for t in state_topics
    )
    state_bytes += directory_bytes(runner.state_dirs(plan))
    stores = runner.store_dirs(plan)
    disk = disk_bytes(stores) if stores else None
    broker = (
        compacted_changelog_bytes(kafka.bootstrap_servers, state_topics, runner.changelog_codec)
        if state_topics
        else None
    )
    if not options.keep_topics:
        own = topics_named(kafka.bootstrap_servers, lambda n: runner.own_topic(plan, n))
        delete_topics(kafka.bootstrap_servers, [plan.output_topic, *own])
    shutil.rmtree(plan.work_dir, ignore_errors=True)
    return Run(
        Timing(
            events,
            round(wall_s, 3),
            round(cpu_s, 3),
            None if broker_cpu is None else round(broker_cpu, 3),
            round(samples.client_cpu_s[-1], 3) if samples.client_cpu_s else None,
        ),
        status,
        exit_code,
        verdict,
        round(samples.peak_rss / 2**20, 1),
        state_bytes,
        disk,
        broker,
        log_tail,
    )


def _ratios(results: list[Result]) -> None:
    rates = {x.key: x.events_per_s for x in results if x.status == "ok"}
    copy = rates.get("copy")
    # each Spark engine row against the Spark copy on its own Kafka I/O
    spark_copy = {
        "spark": rates.get("spark-copy"),
        "spark-connector": rates.get("spark-copy-connector"),
    }
    for x in results:
        if x.events_per_s is None:
            continue
        x.ratio_to_copy = ratio(x.events_per_s, copy)
        if x.key in spark_copy:
            x.ratio_to_spark_copy = ratio(x.events_per_s, spark_copy[x.key])
