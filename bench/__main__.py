"""`python -m bench`: the benchmarks (bench/README.md).

python -m bench [options]            every runner on two pre-loaded backlogs, timed marginally
python -m bench latency [options]    end-to-end latency and RSS over time at a steady rate
python -m bench profile [options]    cProfile of the embedded engine on the workload (--perf:
                                     every thread, with Linux perf)
python -m bench core [options]       the bare core alone: µs per event, or instructions
python -m bench core --floor         the same for the peer's rule: the least any core costs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.broker import BrokerChoice, broker_choice
from bench.quix_venv import default_location
from bench.runners import QUIX_CODECS, QUIX_KEYS
from bench.workload import WorkloadShape

RUNNER_KEYS = (
    "core",
    "copy",
    *QUIX_KEYS,
    "embedded",
    "embedded-w1",
    "spark-copy",
    "spark-copy-connector",
    "spark-pass-through",
    "spark",
    "spark-connector",
)


def workload_options(
    parser: argparse.ArgumentParser, events: int, row_bytes: int, toast_bytes: int
) -> None:
    group = parser.add_argument_group("workload")
    group.add_argument("--events", type=int, default=events, help="(default: %(default)s)")
    group.add_argument("--keys", type=int, default=10_000, help="(default: %(default)s)")
    group.add_argument(
        "--row-bytes", type=int, default=row_bytes, help="row without the TOAST column"
    )
    group.add_argument("--toast-bytes", type=int, default=toast_bytes, help="the TOAST column")
    group.add_argument(
        "--placeholder-ratio",
        type=float,
        default=0.5,
        help="share of updates shipping the TOAST column as the placeholder",
    )
    group.add_argument("--partitions", type=int, default=4)
    broker = parser.add_argument_group("broker")
    broker.add_argument(
        "--broker",
        choices=("kafka", "tansu"),
        help="start Apache Kafka from a distribution (--kafka-home or $HYDRATOR_KAFKA_HOME) or "
        "Tansu (default: kafka when a distribution is given, else tansu)",
    )
    broker.add_argument(
        "--kafka-home", type=Path, help="the Apache Kafka distribution (bin/, config/, libs/)"
    )
    broker.add_argument("--bootstrap-servers", help="use this running broker instead")
    parser.add_argument("--json", type=Path, help="also write the figures here")


def choice_of(args: argparse.Namespace) -> BrokerChoice:
    try:
        return broker_choice(args.bootstrap_servers, args.broker, args.kafka_home)
    except ValueError as exc:
        raise SystemExit(f"python -m bench: {exc}") from exc


def shape_of(args: argparse.Namespace) -> WorkloadShape:
    try:
        return WorkloadShape(
            events=args.events,
            keys=args.keys,
            row_bytes=args.row_bytes,
            toast_bytes=args.toast_bytes,
            placeholder_ratio=args.placeholder_ratio,
        )
    except ValueError as exc:
        raise SystemExit(f"python -m bench: {exc}") from exc


def throughput(argv: list[str]) -> None:
    from bench.marginal import small_backlog
    from bench.report import markdown
    from bench.throughput import Options, run_bench

    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Every runner, one after another, on a small and a large pre-loaded "
        "backlog of one workload; events/s and CPU per event from the difference.",
        epilog="Arguments after `--` go to every `hydrator run` (embedded and Spark).",
    )
    workload_options(parser, events=100_000, row_bytes=1_000, toast_bytes=8_000)
    parser.add_argument(
        "--small-events",
        type=int,
        help="the small backlog (default: a quarter of --events, at least --keys)",
    )
    parser.add_argument(
        "--runners",
        default="",
        help=f"comma-separated subset of {','.join(RUNNER_KEYS)} (default: all)",
    )
    parser.add_argument("--skip-spark", action="store_true", help="the Spark runners (the slowest)")
    parser.add_argument(
        "--spark-batch", type=int, help="Spark's records per micro-batch (default: events/10)"
    )
    parser.add_argument(
        "--spark-kafka-jars",
        type=Path,
        metavar="DIR",
        help="a directory of Spark's Kafka connector's jars (spark-sql-kafka-0-10 and its "
        "dependencies): the connector's runners need them",
    )
    parser.add_argument("--quix-venv", type=Path, default=default_location())
    parser.add_argument("--runner-timeout", type=float, default=1800, metavar="SECONDS")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the topics")
    parser.add_argument(
        "--quix-compression",
        choices=QUIX_CODECS,
        default="lz4",
        help="the like-for-like Quix runners' compression (quix-eos-lz4, quix-eos-2-lz4, named "
        "by it): Quix Streams' producer compresses its outputs and changelog so, as the "
        "engine compresses its outputs (default: %(default)s, the engine's); quix-eos and "
        "quix-eos-2 keep Quix's default, none",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every runner's pair of runs this often, every other round in reverse order; "
        "figures and ratios are the rounds' medians (default: 1)",
    )
    own, engine_args = _split(argv)
    args = parser.parse_args(own)
    selected = tuple(k for k in args.runners.split(",") if k)
    unknown = sorted(set(selected) - set(RUNNER_KEYS))
    if unknown:
        parser.error(f"--runners: unknown {', '.join(unknown)} (known: {', '.join(RUNNER_KEYS)})")
    other_codec = [
        k for k in selected if k.startswith("quix-eos") and k[-4:].lstrip("-") in QUIX_CODECS
        and not k.endswith(f"-{args.quix_compression}")
    ]  # fmt: skip
    if other_codec:
        parser.error(
            f"--runners: {', '.join(other_codec)} compress otherwise than --quix-compression "
            f"{args.quix_compression}"
        )
    shape = shape_of(args)
    try:
        small = args.small_events or small_backlog(shape.events, shape.keys)
    except ValueError as exc:
        parser.error(str(exc))
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not shape.keys <= small < shape.events:
        parser.error("--small-events must be at least --keys and less than --events")
    options = Options(
        shape=shape,
        small_events=small,
        partitions=args.partitions,
        broker=choice_of(args),
        selected=selected,
        skip_spark=args.skip_spark,
        spark_batch=args.spark_batch or max(1000, shape.events // 10),
        quix_venv=args.quix_venv,
        runner_timeout_s=args.runner_timeout,
        keep_topics=args.keep_topics,
        engine_args=tuple(engine_args),
        rounds=args.rounds,
        quix_compression=args.quix_compression,
        spark_kafka_jars=_jars(parser, args.spark_kafka_jars),
    )
    report = run_bench(options)
    print(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if any(r["output_check"].startswith("WRONG") for r in report["results"]):
        raise SystemExit(1)


def latency(argv: list[str]) -> None:
    from bench.latency import LatencyOptions, run_latency, summary

    parser = argparse.ArgumentParser(
        prog="python -m bench latency",
        description="End-to-end latency (append to the input -> visible to a read_committed "
        "reader of the output) and RSS over time of the embedded engine at a steady rate.",
        epilog="Arguments after `--` go to `hydrator run`.",
    )
    workload_options(parser, events=0, row_bytes=500, toast_bytes=2_000)
    parser.add_argument("--rate", type=int, default=5_000, help="events/s (default: 5000)")
    parser.add_argument("--minutes", type=float, default=1.0, help="10 is the soak")
    parser.add_argument(
        "--max-broker-gb",
        type=float,
        default=8.0,
        help="refuse a run a local Tansu (which keeps every record in memory) would need more "
        "memory for (default: 8)",
    )
    parser.add_argument(
        "--quix",
        action="store_true",
        help="then run Quix Streams EOS (one instance) at the same rate: p99 as a ratio too",
    )
    parser.add_argument("--quix-venv", type=Path, default=default_location())
    parser.add_argument(
        "--quix-commit-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="Quix's commit interval; its exactly-once outputs become visible at each commit "
        "(default: 5, Quix's own)",
    )
    own, engine_args = _split(argv)
    args = parser.parse_args(own)
    if args.rate < 1 or args.minutes <= 0:
        parser.error("--rate and --minutes must be positive")
    args.events = max(args.keys, 1)
    options = LatencyOptions(
        shape=shape_of(args),
        partitions=args.partitions,
        broker=choice_of(args),
        rate=args.rate,
        seconds=args.minutes * 60,
        max_broker_bytes=int(args.max_broker_gb * 2**30),
        engine_args=tuple(engine_args),
        quix_venv=args.quix_venv if args.quix else None,
        quix_commit_interval_s=args.quix_commit_interval,
    )
    report = run_latency(options)
    print(summary(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def profile(argv: list[str]) -> None:
    from bench.perf_profile import run_perf_profile
    from bench.profile_engine import run_profile

    parser = argparse.ArgumentParser(
        prog="python -m bench profile",
        description="The embedded engine in this process under cProfile, on the workload; with "
        "--perf, `hydrator run` under Linux perf, every thread sampled.",
    )
    workload_options(parser, events=100_000, row_bytes=1_000, toast_bytes=8_000)
    parser.add_argument(
        "--perf",
        action="store_true",
        help="sample every thread with Linux perf instead (librdkafka's and RocksDB's too): "
        "`hydrator run` as a child process, its CPU by thread, library and symbol",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="with --perf: `hydrator run --workers`"
    )
    parser.add_argument(
        "--out", type=Path, help="bench/results/embedded.prof (embedded.perf.data with --perf)"
    )
    own, engine_args = _split(argv)
    args = parser.parse_args(own)
    shape = shape_of(args)
    if args.perf:
        out = args.out or Path("bench/results/embedded.perf.data")
        run_perf_profile(shape, args.partitions, choice_of(args), args.workers, out, engine_args)
    else:
        out = args.out or Path("bench/results/embedded.prof")
        run_profile(shape, args.partitions, choice_of(args), out)


def core(argv: list[str]) -> None:
    from bench.core import instructions, timed_passes
    from bench.machine import describe, machine_facts
    from hydrator import core_build

    parser = argparse.ArgumentParser(
        prog="python -m bench core",
        description="The bare core (Hydrator.route and process, a dict for state) over the "
        "workload's events, made beforehand; each pass starts afresh on the same events.",
    )
    workload_options(parser, events=20_000, row_bytes=1_000, toast_bytes=8_000)
    parser.set_defaults(keys=2_000)
    parser.add_argument("--passes", type=int, default=5, help="timed passes; the best counts")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per event under valgrind's callgrind instead (two runs)",
    )
    parser.add_argument("--callgrind-dir", type=Path, default=Path("bench/results"))
    parser.add_argument(
        "--floor",
        action="store_true",
        help="the peer's rule instead of the core (bench/peer_rule.py: one parse and one dump of "
        "each event, a dict for state): the least any core costs on this workload",
    )
    args = parser.parse_args(argv)
    shape = shape_of(args)
    what = "floor (the peer's rule)" if args.floor else f"core ({core_build()})"
    if args.instructions:
        own = [a for a in argv if a != "--instructions"]
        name = "floor" if args.floor else "core"
        per_event = instructions(own, shape.events, args.callgrind_dir, name)
        print(f"{what}: {per_event:,.0f} instructions per event")
        return
    print(describe(machine_facts()))
    print(what)
    passes = timed_passes(shape, args.passes, args.floor)
    for number, one in enumerate(passes, 1):
        wall, cpu = one.us_per_event()
        print(f"pass {number}: {wall:.1f} µs/event wall, {cpu:.1f} µs/event CPU")
    wall, cpu = min(p.us_per_event()[0] for p in passes), min(p.us_per_event()[1] for p in passes)
    print(f"best of {len(passes)}: {wall:.1f} µs/event wall, {cpu:.1f} µs/event CPU")


def _jars(parser: argparse.ArgumentParser, directory: Path | None) -> str | None:
    """The jars of --spark-kafka-jars, absolute and comma-separated."""
    if directory is None:
        return None
    jars = sorted(str(path.absolute()) for path in directory.glob("*.jar"))
    if not jars:
        parser.error(f"--spark-kafka-jars: no jars in {directory}")
    return ",".join(jars)


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    commands = {"latency": latency, "profile": profile, "core": core}
    if argv and argv[0] in commands:
        commands[argv[0]](argv[1:])
    else:
        throughput(argv)


if __name__ == "__main__":
    main()
