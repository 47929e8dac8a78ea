"""`python -m bench latency`: the embedded engine at a steady input rate, and with `--quix` the
peer (Quix Streams EOS, one instance) after it in the same run at the same rate, so that p99 is
also a ratio.

Every key is inserted first and the engine started (`hydrator run`, no --available-now) until
it has caught up; then updates are produced at `--rate` for `--minutes`, each with a
`bench.sent` header (the wall time of its produce() call, in ns; the engine keeps input headers
on its output, as Quix Streams does). A separate reader process, read_committed, takes the time
each output becomes visible: latency = seen - sent. The engine's process tree is sampled for RSS
every 100 ms. The peer gets the same events on topics of its own.
"""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import tempfile
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, KafkaError, Producer
from tqdm import tqdm

from bench.broker import BrokerChoice, broker, create_topics
from bench.broker import preload as preload_topic
from bench.machine import describe, machine_facts
from bench.measure import OutputWatch, TreeSampler
from bench.quix_venv import quix_python
from bench.runners import REPO, Plan, hydrator_command, quix_runner, runner_env
from bench.workload import Workload, WorkloadShape
from hydrator.kafka import consumed
from hydrator.kafka.offsets import from_the_start

SENT_HEADER = "bench.sent"
READER_READY_S = 120


@dataclass(frozen=True)
class LatencyOptions:
    shape: WorkloadShape  # events: the inserts only; the feed adds rate x seconds updates
    partitions: int
    broker: BrokerChoice
    rate: int
    seconds: float
    max_broker_bytes: int
    engine_args: tuple[str, ...]
    quix_venv: Path | None = None  # given: the peer runs after the engine, at the same rate
    quix_commit_interval_s: float = 5.0  # Quix's default: its EOS outputs show at each commit

    @property
    def fed(self) -> int:
        return int(self.rate * self.seconds)


def broker_bytes(options: LatencyOptions) -> int:
    """What a broker that keeps everything (Tansu's memory storage) holds after the run: the
    input, the output (row and before image) and one changelog write per event, at most."""
    shape = options.shape
    row = shape.row_bytes + shape.toast_bytes + 400
    source = shape.row_bytes + (1 - shape.placeholder_ratio) * shape.toast_bytes + 400
    runs = 1 if options.quix_venv is None else 2
    return runs * int((options.fed + shape.keys) * (source + 2 * row + row))


def run_latency(options: LatencyOptions) -> dict[str, Any]:
    machine = machine_facts()
    need = broker_bytes(options)
    in_memory = options.broker.bootstrap_servers is None and options.broker.kafka_home is None
    if in_memory and need > options.max_broker_bytes:
        limit = options.max_broker_bytes / 2**30
        raise SystemExit(
            "python -m bench latency: the local Tansu keeps every record in memory and this run "
            f"would hold about {need / 2**30:.1f} GB (--max-broker-gb {limit:g}). "
            "Give --kafka-home (Apache Kafka keeps records on disk) or --bootstrap-servers, or "
            "lower --rate, --minutes, --row-bytes or --toast-bytes."
        )
    shape = WorkloadShape(
        events=options.shape.keys + options.fed,
        keys=options.shape.keys,
        row_bytes=options.shape.row_bytes,
        toast_bytes=options.shape.toast_bytes,
        placeholder_ratio=options.shape.placeholder_ratio,
    )
    with broker(options.broker) as kafka, tempfile.TemporaryDirectory() as work:
        engine = _run_one(kafka.bootstrap_servers, shape, options, Path(work) / "engine", _engine)
        quix = None
        if options.quix_venv is not None:
            python = quix_python(options.quix_venv, Path(work) / "quix-venv.log")
            peer = quix_runner("exactly-once", 1, python, None)
            interval = ["--commit-interval", str(options.quix_commit_interval_s)]
            quix = _run_one(
                kafka.bootstrap_servers,
                shape,
                options,
                Path(work) / "quix",
                lambda plan: [*peer.command(plan), *interval],
            )
    report = {
        "machine": machine,
        "workload": asdict(options.shape) | {"partitions": options.partitions},
        "rate": options.rate,
        "seconds": options.seconds,
        "engine_args": list(options.engine_args),
        **engine,
    }
    if quix is not None:
        report["quix"] = quix | {"commit_interval_s": options.quix_commit_interval_s}
        report["p99_ratio_to_quix"] = _p99_ratio(engine, quix)
    return report


def _engine(plan: Plan) -> list[str]:
    return [a for a in hydrator_command(plan, "embedded") if a != "--available-now"]


def _p99_ratio(engine: dict[str, Any], quix: dict[str, Any]) -> float | None:
    ours, theirs = engine["latency_ms"].get("p99"), quix["latency_ms"].get("p99")
    return round(ours / theirs, 2) if ours is not None and theirs else None


def _run_one(
    bootstrap: str,
    shape: WorkloadShape,
    options: LatencyOptions,
    work: Path,
    command_of: Callable[[Plan], list[str]],
) -> dict[str, Any]:
    """One runner at the rate, on topics of its own: its latencies and RSS."""
    work.mkdir(parents=True)
    workload = Workload(shape)
    events = workload.events()
    topic = f"bench-lat-{uuid.uuid4().hex[:8]}.public.customers"
    plan = Plan(
        bootstrap,
        topic,
        f"{topic}.out",
        f"bench-lat-{uuid.uuid4().hex[:6]}",
        work,
        shape.events,
        options.partitions,
    )
    create_topics(bootstrap, [topic, plan.output_topic], options.partitions)
    inserts = ((key, value) for _, key, value in _take(events, shape.keys))
    preload_topic(bootstrap, topic, inserts, lambda: None)
    # Made before the clock starts: building them while feeding took a third of a core,
    # which the broker and the engine then lacked on a small machine.
    updates = [(key, value) for _, key, value in events]
    command = command_of(plan) + list(options.engine_args if command_of is _engine else ())
    log = open(work / "engine.log", "wb")  # noqa: SIM115
    engine = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=runner_env()
    )
    sampler = TreeSampler(engine.pid).start()
    try:
        caught_up = _wait_for_output(bootstrap, plan, shape.keys, engine)
        # Both are ready before the clock starts: updates fed before the reader had read to
        # the end, or before the feeder's producer had its connection and producer id, waited
        # for them (the first second's figures were the harness's, not the engine's).
        feeder = _feeder(bootstrap, topic)
        reader, results_path, ready = _start_reader(bootstrap, plan.output_topic, options, work)
        if not ready.wait(READER_READY_S):
            raise SystemExit(f"the latency reader was not ready within {READER_READY_S} s")
        feed_began = time.time()
        _feed(feeder, topic, updates, options)
        feed_ended = time.time()
        del feeder  # closed here, not after the broker has stopped (connection-refused noise)
        reader.join(timeout=60 + options.seconds * 0.1)
        if reader.is_alive():
            reader.terminate()
    finally:
        engine.send_signal(signal.SIGTERM)
        try:
            engine.wait(timeout=60)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.wait()
        samples = sampler.stop()
        log.close()
    latencies = array("q")
    if results_path.exists():
        latencies.frombytes(results_path.read_bytes())
    latencies_ms = sorted(x / 1e6 for x in latencies[::2])
    # The engine's produce() calls, its outputs' CreateTime. Quix Streams gives its outputs
    # its inputs' timestamps (as Kafka Streams does): no such split there.
    produced = latencies[1::2] if command_of is _engine else ()
    produced_ms = sorted(x / 1e6 for x in produced if x >= 0)
    return {
        "catch_up_s": round(caught_up, 1),
        "fed": options.fed,
        "seen": len(latencies_ms),
        "feed_rate": round(options.fed / (feed_ended - feed_began)),
        "latency_ms": _percentiles(latencies_ms),
        "to_produce_ms": _percentiles(produced_ms),
        "rss": _rss_over_time(samples, feed_began, feed_ended),
    }


def _take(events, count: int):
    for _ in range(count):
        yield next(events)


def _wait_for_output(bootstrap: str, plan: Plan, count: int, engine: subprocess.Popen) -> float:
    began = time.monotonic()
    watch = OutputWatch(bootstrap, plan.output_topic, plan.partitions, lambda n: None).start()
    try:
        while not watch.series or watch.series[-1][1] < count:
            if engine.poll() is not None:
                raise SystemExit(f"the engine exited {engine.returncode} before catching up")
            time.sleep(0.2)
    finally:
        watch.stop()
    return time.monotonic() - began


def _feeder(bootstrap: str, topic: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            # At 5 ms its I/O thread spun for 40% of a core against the busy broker, which the
            # broker and the engine then lacked on a 2-core machine. A record's latency counts
            # from its produce() call, so this linger is in every figure (10 ms on average).
            "linger.ms": 20,
            "enable.idempotence": True,
        }
    )
    producer.list_topics(topic, timeout=30)
    return producer


def _feed(
    producer: Producer, topic: str, updates: list[tuple[bytes, bytes]], options: LatencyOptions
) -> None:
    began = time.monotonic()
    sent = 0
    with tqdm(total=options.fed, desc="feed", unit="ev", leave=False) as bar:
        while sent < options.fed:
            due = min(options.fed, int((time.monotonic() - began) * options.rate))
            for key, value in updates[sent:due]:
                header: list[tuple[str, str | bytes | None]] = [
                    (SENT_HEADER, str(time.time_ns()).encode())
                ]
                while True:
                    try:
                        producer.produce(topic, value, key, headers=header)
                        break
                    except BufferError:
                        producer.poll(0.01)
            bar.update(due - sent)
            sent = due
            producer.poll(0)
            time.sleep(0.002)
    producer.flush(60)


def _start_reader(bootstrap: str, topic: str, options: LatencyOptions, work: Path):
    path = work / "latencies.bin"
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    reader = context.Process(
        target=read_latencies,
        args=(
            bootstrap,
            topic,
            options.partitions,
            options.fed,
            options.seconds + 60,
            str(path),
            ready,
        ),
        daemon=True,
    )
    reader.start()
    return reader, path, ready


def read_latencies(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    timeout_s: float,
    path: str,
    ready: Any,
) -> None:
    """In its own process: visible time - sent time of every output carrying the header, and
    its CreateTime - sent time (the runner's produce() call, where the runner sets that time).
    `ready` is set once every partition has been read to its end (the catch-up's outputs)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-latency",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
            "fetch.message.max.bytes": 16 * 1024 * 1024,
            "enable.partition.eof": True,
        }
    )
    consumer.assign(from_the_start(topic, range(partitions)))
    at_end: set[int] = set()
    # per output: visible - sent, and the output's CreateTime - sent (-1 when it has none)
    latencies = array("q")
    deadline = time.monotonic() + timeout_s
    try:
        while len(latencies) < 2 * expected and time.monotonic() < deadline:
            # A consume of N records with a timeout returns when it has all N or the timeout
            # has passed: records that had arrived waited up to 0.1 s in it, and the figures
            # carried that wait. Waiting for the first and taking what is there with it does not.
            first = consumer.poll(0.1)
            if first is None:
                continue
            for msg in [first, *consumer.consume(1000, 0)]:
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(str(error))
                    at_end.add(consumed.partition(msg))
                    if len(at_end) == partitions:
                        ready.set()
                    continue
                seen = time.time_ns()
                for name, value in consumed.headers(msg) or ():
                    if name == SENT_HEADER and value is not None:
                        sent = int(value)
                        stamp = msg.timestamp()
                        created = -1
                        if stamp[0] == TIMESTAMP_CREATE_TIME:
                            created = stamp[1] * 1_000_000 - sent
                        latencies.extend((seen - sent, created))
    finally:
        consumer.close()
        Path(path).write_bytes(latencies.tobytes())


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))], 1)

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": round(values[-1], 1)}


def _rss_over_time(samples, began: float, ended: float) -> dict[str, Any]:
    """RSS (MB) at ten points of the feed, and its growth from 20 % into the feed (warmed up)
    to the largest of the last 10 %."""
    points = []
    for i in range(11):
        when = began + (ended - began) * i / 10
        index = min(range(len(samples.times)), key=lambda j: abs(samples.times[j] - when))
        points.append(round(samples.rss[index] / 2**20, 1))
    tail = [
        rss
        for t, rss in zip(samples.times, samples.rss, strict=True)
        if t >= ended - (ended - began) * 0.1 and t <= ended
    ]
    baseline = points[2]
    end = max(tail, default=0) / 2**20
    return {
        "mb_at_tenths": points,
        "baseline_mb": baseline,
        "end_mb": round(end, 1),
        "growth_pct": round((end / baseline - 1) * 100, 1) if baseline else None,
        "peak_mb": round(samples.peak_rss / 2**20, 1),
    }


def summary(report: dict[str, Any]) -> str:
    shape = report["workload"]
    quix = report.get("quix")
    lines = [
        f"Embedded engine at {report['rate']:,} events/s for {report['seconds']:.0f} s "
        f"(fed at {report['feed_rate']:,}/s)"
        + (
            f", then Quix Streams EOS, {quix.get('commit_interval_s', 5.0):g} s commits "
            f"(fed at {quix['feed_rate']:,}/s)"
            if quix
            else ""
        )
        + f": {shape['keys']:,} keys, "
        f"~{shape['row_bytes']:,} B row + {shape['toast_bytes']:,} B TOAST column, "
        f"{shape['placeholder_ratio']:.0%} placeholders, {shape['partitions']} partitions; "
        f"{describe(report['machine'])}.",
        "",
        "| figure | embedded engine |" + (" Quix Streams EOS, one instance |" if quix else ""),
        "|---|---|" + ("---|" if quix else ""),
    ]
    runs = [report] + ([quix] if quix else [])

    def line(name: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {name} | " + " | ".join(cell(run) for run in runs) + " |"

    def percentiles(figure: str) -> Callable[[dict[str, Any]], str]:
        def cell(run: dict[str, Any]) -> str:
            lat = run.get(figure) or {}
            if lat.get("p50") is None:
                return "-"
            return f"{lat.get('p50')} / {lat.get('p90')} / {lat.get('p99')} / {lat.get('max')}"

        return cell

    lines += [
        line("outputs seen / fed", lambda run: f"{run['seen']:,} / {run['fed']:,}"),
        line("end-to-end latency p50 / p90 / p99 / max (ms)", percentiles("latency_ms")),
        line("of which up to the engine's produce() (ms)", percentiles("to_produce_ms")),
        line(
            "RSS MB at each tenth of the run",
            lambda run: " ".join(map(str, run["rss"]["mb_at_tenths"])),
        ),
        line(
            "RSS growth (20 % into the run -> last 10 %)",
            lambda run: f"{run['rss']['growth_pct']} %",
        ),
        line("peak RSS MB (process tree)", lambda run: str(run["rss"]["peak_mb"])),
    ]
    if quix:
        lines.append(f"| p99 ratio, engine / Quix | {report['p99_ratio_to_quix']} | |")
    lines += [
        "",
        "Latency: produce() call with a `bench.sent` header -> the output record visible to a "
        "read_committed reader in its own process.",
    ]
    return "\n".join(lines)
