"""`python -m bench`: every runner, one after another, on one pre-loaded workload.

How each figure is taken (also in bench/README.md):
* events/s: workload events / (last - first output record timestamp). Every runner's producer
  stamps a record when it produces it, so start-up, group joins and restores are outside the
  window. Should a runner's records carry another time (earlier than the runner's start), the
  bench falls back to the output topic's high watermarks, polled every 250 ms.
* CPU µs/event: CPU time of the runner's whole process tree (every process and thread, sampled
  with psutil every 100 ms) within that same window, per workload event. The broker's CPU is
  not in it. The whole run's CPU (start-up included) is in the JSON.
* broker CPU µs/event: the local Tansu broker's CPU in the same window, per event: what a
  runner's reads and writes (outputs, changelog, transactions) cost the broker, which shares
  the machine. Not taken with --bootstrap-servers.
* peak RSS: the largest sum of resident memory over the process tree at a sample.
* state B/event: bytes (key + value) written to the runner's changelog topics, or the growth
  of its checkpoint state directory (Spark), per event.
* output check: a read_committed reader counts the output and checks every record against the
  workload's truth: `doc` filled with the row's value, `before` the previous row.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from bench import runners as r
from bench.broker import QUIX_RETENTION_NOTE, Broker, broker, create_topics, delete_topics
from bench.broker import preload as preload_topic
from bench.machine import machine_facts
from bench.measure import (
    OutputWatch,
    TreeSampler,
    directory_bytes,
    scan_topic,
    topics_named,
)
from bench.quix_venv import quix_python
from bench.runners import REPO, runner_env
from bench.workload import Checker, Workload, WorkloadShape

SHORTEST_WINDOW_S = 1.0


@dataclass
class Result:
    key: str
    label: str
    status: str = "ok"  # ok, n/a (...), failed: ...
    events_per_s: float | None = None
    cpu_us_per_event: float | None = None
    cpu_us_per_event_whole_run: float | None = None
    broker_cpu_us_per_event: float | None = None
    peak_rss_mb: float | None = None
    state_bytes_per_event: float | None = None
    ratio_to_copy: float | None = None
    ratio_to_quix_eos: float | None = None
    ratio_to_spark_copy: float | None = None
    output_records: int | None = None
    output_check: str = ""
    check_examples: list[str] = field(default_factory=list)
    rate_method: str = ""
    window_s: float | None = None
    wall_s: float | None = None
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Options:
    shape: WorkloadShape
    partitions: int
    bootstrap_servers: str | None
    selected: tuple[str, ...]  # runner keys; empty: all
    skip_spark: bool
    spark_batch: int
    quix_venv: Path
    runner_timeout_s: float
    keep_topics: bool
    engine_args: tuple[str, ...]


def all_runners(options: Options, work: Path) -> list[r.Runner]:
    wanted = set(options.selected)
    take = (lambda key: key in wanted) if wanted else (lambda key: True)
    has_workers = "--workers" in r.engine_help()
    quix_path: Path | None = None
    quix_problem: str | None = None
    if take("quix-alo") or take("quix-eos"):
        try:
            quix_path = quix_python(options.quix_venv, work / "quix-venv.log")
        except (RuntimeError, OSError) as exc:
            quix_problem = f"n/a (no Quix venv: {exc})"
    candidates = [
        r.copy_runner(),
        r.quix_runner("at-least-once", quix_path, quix_problem),
        r.quix_runner("exactly-once", quix_path, quix_problem),
        r.embedded_runner(None, has_workers, options.engine_args),
        r.embedded_runner("1", has_workers, options.engine_args),
    ]
    if not options.skip_spark:
        candidates.append(r.spark_copy_runner(options.spark_batch))
        candidates.append(r.spark_runner(options.spark_batch, options.engine_args))
    return [runner for runner in candidates if take(runner.key)]


def run_bench(options: Options) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="hydrator-bench-"))
    began = time.time()
    machine = machine_facts()
    try:
        with broker(options.bootstrap_servers) as kafka:
            runner_list = all_runners(options, work)
            workload = Workload(options.shape)
            topic = f"bench-{uuid.uuid4().hex[:8]}.public.customers"
            preload_s = _preload(kafka, topic, workload, options)
            results = []
            if not options.selected or "core" in options.selected:
                from bench.core import core_result

                results.append(core_result(workload))
            for runner in runner_list:
                results.append(run_one(kafka, topic, workload, runner, options, work))
            if not options.keep_topics:
                delete_topics(kafka.bootstrap_servers, [topic])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _ratios(results)
    notes = [QUIX_RETENTION_NOTE] if any(x.key.startswith("quix") for x in results) else []
    for runner in runner_list:
        notes.extend(runner.notes)
    return {
        "machine": machine | {"broker": kafka.kind},
        "workload": {**asdict(options.shape), "partitions": options.partitions},
        "preload_s": round(preload_s, 1),
        "total_s": round(time.time() - began, 1),
        "results": [asdict(x) for x in results],
        "notes": notes,
    }


def _preload(kafka: Broker, topic: str, workload: Workload, options: Options) -> float:
    create_topics(kafka.bootstrap_servers, [topic], options.partitions)
    began = time.monotonic()
    with tqdm(total=options.shape.events, desc="pre-load", unit="ev", leave=False) as bar:
        events = ((key, value) for _, key, value in workload.events())
        preload_topic(kafka.bootstrap_servers, topic, events, lambda: bar.update(1))
    return time.monotonic() - began


# A runner's bar shows what it did and how fast, no time left: before its outputs flow (Quix
# and Spark take seconds to start, then write a first few) the rate says nothing of the rest,
# and tqdm's estimate from it reads as hours.
NO_ETA_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}]"


def run_one(
    kafka: Broker,
    topic: str,
    workload: Workload,
    runner: r.Runner,
    options: Options,
    work: Path,
) -> Result:
    result = Result(runner.key, runner.label)
    if runner.unavailable:
        result.status = runner.unavailable
        return result
    events = options.shape.events
    app = f"bench-{runner.key}-{uuid.uuid4().hex[:6]}"
    plan = r.Plan(
        kafka.bootstrap_servers,
        topic,
        f"{topic}.{runner.key}",
        app,
        work / app,
        events,
        options.partitions,
    )
    plan.work_dir.mkdir(parents=True)
    create_topics(kafka.bootstrap_servers, [plan.output_topic], options.partitions)
    log_path = plan.work_dir / "runner.log"
    started = time.time()
    with (
        open(log_path, "wb") as log,
        tqdm(total=events, desc=runner.key, unit="ev", leave=False, bar_format=NO_ETA_BAR) as bar,
    ):
        process = subprocess.Popen(
            runner.command(plan), stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=runner_env()
        )
        sampler = TreeSampler(process.pid).start()
        broker_sampler = TreeSampler(kafka.pid).start() if kafka.pid is not None else None
        watch = OutputWatch(
            kafka.bootstrap_servers,
            plan.output_topic,
            options.partitions,
            lambda n: bar.update(min(n, events) - bar.n),
        ).start()
        try:
            result.exit_code = process.wait(timeout=options.runner_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            result.status = f"failed: no end within {options.runner_timeout_s:.0f} s"
        finally:
            samples = sampler.stop()
            broker_samples = broker_sampler.stop() if broker_sampler is not None else None
            watch.stop()
    ended = time.time()
    result.wall_s = round(ended - started, 1)
    result.peak_rss_mb = round(samples.peak_rss / 2**20, 1)
    if result.exit_code not in (0, None) and result.status == "ok":
        tail = log_path.read_bytes()[-1500:].decode(errors="replace")
        result.status = f"failed: exit {result.exit_code}"
        result.notes.append(tail)
    checker = Checker(workload, runner.hydrates)
    scan = scan_topic(kafka.bootstrap_servers, plan.output_topic, checker.check)
    verdict = checker.finish()
    result.output_records = scan.records
    result.output_check = verdict.summary() + ("" if runner.hydrates else " (count only)")
    result.check_examples = verdict.examples
    window = _window(scan.first_timestamp_ms, scan.last_timestamp_ms, started, watch)
    if window is not None:
        first, last, result.rate_method = window
        result.window_s = round(last - first, 3)
        if last - first < SHORTEST_WINDOW_S:
            result.notes.append(
                f"{runner.key}: its output took {last - first:.3f} s, too short to time well: "
                "give more --events"
            )
        if last > first:
            result.events_per_s = round(events / (last - first))
            cpu = samples.cpu_at(last) - samples.cpu_at(first)
            result.cpu_us_per_event = round(cpu / events * 1e6, 1)
            if broker_samples is not None and broker_samples.cpu_s:
                broker_cpu = broker_samples.cpu_at(last) - broker_samples.cpu_at(first)
                result.broker_cpu_us_per_event = round(broker_cpu / events * 1e6, 1)
    if samples.cpu_s:
        result.cpu_us_per_event_whole_run = round(samples.cpu_s[-1] / events * 1e6, 1)
    state_topics = topics_named(kafka.bootstrap_servers, lambda n: runner.state_topic(plan, n))
    state_bytes = sum(
        scan_topic(kafka.bootstrap_servers, t, committed_only=False).bytes for t in state_topics
    )
    state_bytes += directory_bytes(runner.state_dirs(plan))
    result.state_bytes_per_event = round(state_bytes / events, 1)
    if not options.keep_topics:
        own = topics_named(kafka.bootstrap_servers, lambda n: runner.own_topic(plan, n))
        delete_topics(kafka.bootstrap_servers, [plan.output_topic, *own])
    shutil.rmtree(plan.work_dir, ignore_errors=True)
    return result


def _window(
    first_ms: int | None, last_ms: int | None, started: float, watch: OutputWatch
) -> tuple[float, float, str] | None:
    """(first, last) output time in wall seconds and how they were found."""
    if first_ms is not None and last_ms is not None and first_ms / 1000 >= started - 1:
        return first_ms / 1000, last_ms / 1000, "record timestamps"
    span = watch.span()
    if span is None:
        return None
    return span[0], span[1], "high watermarks"


def _ratios(results: list[Result]) -> None:
    rates = {x.key: x.events_per_s for x in results if x.status == "ok"}
    copy, quix = rates.get("copy"), rates.get("quix-eos")
    spark_copy = rates.get("spark-copy")
    for x in results:
        if x.events_per_s is None:
            continue
        if copy:
            x.ratio_to_copy = round(x.events_per_s / copy, 2)
        if quix:
            x.ratio_to_quix_eos = round(x.events_per_s / quix, 2)
        if spark_copy and x.key == "spark":
            x.ratio_to_spark_copy = round(x.events_per_s / spark_copy, 2)
