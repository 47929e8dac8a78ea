"""Throughput of the embedded engine on a pre-loaded topic, against the pure core on the same
records (see the README's Benchmarks).

A generated Debezium Postgres stream (hydrator.demo.stream: placeholders in every typed shape,
deletes, key changes) of N records over K keys is produced to a topic first; then
`EmbeddedEngine` runs with `--available-now` (exactly-once on: transactions, changelog, offsets)
and the rate is taken between its first and its last processed record, so start-up (group join,
topic creation) is not in it. The core figure is `Hydrator.process` over the same records in one
loop with a dict for state: what the engine costs on top of it is the shell's overhead. Wall
rates move 10-20 % from run to run on a shared 2-core machine (the broker competes for the same
cores); the CPU time of the engine's loop thread (`engine_loop_thread_cpu_us_per_event`: shell
plus core, without librdkafka's threads or the broker) is the steadier figure to compare.

Run (from the repository root):

    .venv/bin/python bench/embedded_throughput.py                      # 100k events
    .venv/bin/python bench/embedded_throughput.py --events 20000 --profile
    .venv/bin/python bench/embedded_throughput.py --bootstrap-servers HOST:PORT

Starts a throwaway Tansu broker unless --bootstrap-servers is given. `--profile` writes a
cProfile of the engine run to bench/results/embedded.prof.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from hydrator.config import RunConfig
from hydrator.core import Hydrator
from hydrator.core.records import RawRecord
from hydrator.demo.publish import create_topic, publish
from hydrator.demo.stream import DemoStream
from hydrator.engines.embedded import EmbeddedEngine
from hydrator.kafka.local_broker import LocalBroker


def core_rate(topic: str, records: list, placed: list) -> tuple[float, float]:
    """(events/s, CPU µs per event) of the bare core loop, best of three."""
    raws = [
        RawRecord(topic, where.partition, where.offset, r.key, r.value, r.headers)
        for r, where in zip(records, placed, strict=True)
    ]
    runs = [_core_once(raws) for _ in range(3)]
    return max(rate for rate, _ in runs), min(cpu for _, cpu in runs)


def _core_once(raws: list[RawRecord]) -> tuple[float, float]:
    hydrator = Hydrator()
    states: dict = {}
    began, began_cpu = time.perf_counter(), time.process_time()
    for raw in raws:
        key = hydrator.route(raw)
        step = hydrator.process(states.get(key), raw, 0)
        if key is not None:
            states[key] = step.state
        for handoff in step.handoffs:
            states[handoff.new_key] = hydrator.receive_handoff(
                states.get(handoff.new_key), handoff, 0
            ).state
    cpu = time.process_time() - began_cpu
    return len(raws) / (time.perf_counter() - began), cpu / len(raws) * 1e6


def engine_rate(bootstrap: str, topic: str, total: int, profile: Path | None) -> dict:
    app = f"bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as state_dir:
        config = RunConfig(
            engine="embedded",
            bootstrap_servers=bootstrap,
            input_topics=(topic,),
            output_topic=f"{topic}.enriched",
            state_dir=Path(state_dir),
            application_id=app,
            available_now=True,
            progress_interval_s=3600,
        )
        engine = EmbeddedEngine(config)
        marks: dict[str, float] = {}
        done = threading.Event()

        # The engine's loop runs in this (the main) thread; its CPU time is the shell plus the
        # core, without librdkafka's threads, the broker or whatever else shares the machine.
        loop_clock = time.pthread_getcpuclockid(threading.get_ident())

        def mark(name: str) -> None:
            marks[name] = time.perf_counter()
            marks[f"{name}_cpu"] = time.process_time()
            marks[f"{name}_loop_cpu"] = time.clock_gettime(loop_clock)

        def watch() -> None:
            while not done.is_set():
                seen = engine.counts["records"]
                if seen and "first" not in marks:
                    mark("first")
                if seen >= total and "last" not in marks:
                    mark("last")
                time.sleep(0.002)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        began = time.perf_counter()
        profiler = cProfile.Profile() if profile else None
        with profiler if profiler else nullcontext():  # type: ignore[attr-defined]
            engine.run()
        ended = time.perf_counter()
        done.set()
        watcher.join()
        if profiler and profile:
            profile.parent.mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(profile)
    span = marks["last"] - marks["first"]
    cpu = marks["last_cpu"] - marks["first_cpu"]
    loop_cpu = marks["last_loop_cpu"] - marks["first_loop_cpu"]
    return {
        "cpu_us_per_event": cpu / total * 1e6,
        "loop_cpu_us_per_event": loop_cpu / total * 1e6,
        "records": engine.counts["records"],
        "commits": engine.counts["commits"],
        "events_per_s": total / span,
        "processing_s": span,
        "wall_s": ended - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument(
        "--toast-size", type=int, default=200, help="bytes per TOAST column (7 of them per row)"
    )
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--schemas", action="store_true", help="schema envelope on")
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    stream = DemoStream(keys=args.keys, toast_size=args.toast_size, schemas=args.schemas)
    records = stream.records(args.events)
    broker: AbstractContextManager = nullcontext() if args.bootstrap_servers else LocalBroker()
    with broker as local:
        bootstrap = args.bootstrap_servers or local.bootstrap_servers
        topic = f"bench-{uuid.uuid4().hex[:8]}.public.customers"
        create_topic(bootstrap, topic, args.partitions)
        began = time.perf_counter()
        placed = publish(bootstrap, topic, ((r.key, r.value, r.headers) for r in records))
        load_s = time.perf_counter() - began
        core, core_cpu = core_rate(topic, records, placed)
        total = len(records)
        size = sum(len(r.value or b"") for r in records) / total
        # The engine process of a real run holds none of this: its garbage collector must not
        # be made to scan it.
        del records, placed, stream
        gc.collect()
        profile = Path("bench/results/embedded.prof") if args.profile else None
        engine = engine_rate(bootstrap, topic, total, profile)
    figures = {
        "events": total,
        "keys": args.keys,
        "mean_value_bytes": round(size),
        "partitions": args.partitions,
        "load_events_per_s": round(total / load_s),
        "core_events_per_s": round(core),
        "engine_events_per_s": round(engine["events_per_s"]),
        "engine_processing_s": round(engine["processing_s"], 2),
        "engine_wall_s": round(engine["wall_s"], 2),
        "engine_commits": engine["commits"],
        "overhead_us_per_event": round(1e6 / engine["events_per_s"] - 1e6 / core, 1),
        "core_cpu_us_per_event": round(core_cpu, 1),
        "engine_cpu_us_per_event": round(engine["cpu_us_per_event"], 1),
        "overhead_cpu_us_per_event": round(engine["cpu_us_per_event"] - core_cpu, 1),
        "engine_loop_thread_cpu_us_per_event": round(engine["loop_cpu_us_per_event"], 1),
        "shell_loop_thread_cpu_us_per_event": round(engine["loop_cpu_us_per_event"] - core_cpu, 1),
    }
    print("| figure | value |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    assert engine["records"] >= total, Counter(engine)


if __name__ == "__main__":
    main()
