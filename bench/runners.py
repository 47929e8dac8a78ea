"""The runners the bench compares, each a command started as its own process tree on the same
pre-loaded input, writing its own output topic.

A runner knows how to start, whether it is meant to hydrate (the copy is not), and where it
writes its state (changelog topics, a checkpoint directory), so the bench can count the bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hydrator.topology.layout import CHANGELOG_COMPRESSION

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent


def runner_env() -> dict[str, str]:
    """The bench's environment with this tree first on the path: the engine under test is the
    one `python -m bench` runs from."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


@dataclass(frozen=True)
class Plan:
    """One run of one runner."""

    bootstrap: str
    input_topic: str
    output_topic: str
    application_id: str
    work_dir: Path
    events: int
    partitions: int


@dataclass(frozen=True)
class Runner:
    key: str  # what --runners selects
    label: str  # the table's row name
    command: Callable[[Plan], list[str]]
    hydrates: bool = True
    # Topics holding its state (bytes written count as state) and topics it created (deleted
    # after the run); predicates on (plan, topic name).
    state_topic: Callable[[Plan, str], bool] = lambda plan, name: False
    own_topic: Callable[[Plan, str], bool] = lambda plan, name: False
    state_dirs: Callable[[Plan], list[Path]] = lambda plan: []
    # Its local stores (bytes on disk), and the codec the broker keeps its changelog's batches
    # in (what the broker keeps of the changelog: bench/state_bytes.py).
    store_dirs: Callable[[Plan], list[Path]] = lambda plan: []
    changelog_codec: str = "none"
    unavailable: str | None = None  # why it cannot run here (the row says so)
    processes: str = "1"  # how many processes do the work (the table compares at equal counts)
    notes: tuple[str, ...] = field(default=())


def hydrator_command(plan: Plan, engine: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hydrator.cli",
        "run",
        "--engine",
        engine,
        "--bootstrap-servers",
        plan.bootstrap,
        "--input-topic",
        plan.input_topic,
        "--output-topic",
        plan.output_topic,
        "--application-id",
        plan.application_id,
        "--state-dir",
        str(plan.work_dir / "state"),
        "--available-now",
        "--progress-interval",
        "1h",
        *extra,
    ]


def engine_help() -> str:
    """`hydrator run --help` of the engine under test (the tree the bench runs from)."""
    done = subprocess.run(
        [sys.executable, "-m", "hydrator.cli", "run", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=runner_env(),
        timeout=120,
        check=False,
    )
    return done.stdout


def _app_topic(plan: Plan, name: str) -> bool:
    return name.startswith(f"{plan.application_id}-")


def _embedded_changelog(plan: Plan, name: str) -> bool:
    return name.startswith(f"{plan.application_id}-state")


def _local_state(plan: Plan) -> list[Path]:
    return [plan.work_dir / "state"]


def _quix_topic(plan: Plan, name: str) -> bool:
    return plan.application_id in name


def _quix_changelog(plan: Plan, name: str) -> bool:
    return name.startswith("changelog__") and plan.application_id in name


def copy_runner() -> Runner:
    return Runner(
        "copy",
        "confluent-kafka copy (the limit)",
        lambda plan: [
            sys.executable,
            "-m",
            "bench.copy_limit",
            "--bootstrap-servers",
            plan.bootstrap,
            "--input-topic",
            plan.input_topic,
            "--output-topic",
            plan.output_topic,
        ],
        hydrates=False,
    )


QUIX_CODECS = ("lz4", "zstd", "snappy", "gzip")
QUIX_KEYS = (
    "quix-alo",
    "quix-eos",
    "quix-eos-2",
    *(f"quix-eos{n}-{codec}" for codec in QUIX_CODECS for n in ("", "-2")),
)


def quix_runner(
    guarantee: str,
    instances: int,
    python: Path | None,
    why_not: str | None,
    compression: str | None = None,
) -> Runner:
    """Quix Streams, `instances` processes in one consumer group (the input's partitions split
    between them). One instance stops after its `--count` outputs; two stop each after an idle
    second with nothing to read, a wait both backlogs pay alike (it cancels). `compression`:
    its producer's compression.type (None: Quix's default, none), named in the key
    (`quix-eos-lz4`) so that both configurations run side by side."""
    short = "eos" if guarantee == "exactly-once" else "alo"

    def command(plan: Plan) -> list[str]:
        return [
            str(python),
            str(BENCH_DIR / "quix_app.py"),
            "--bootstrap-servers",
            plan.bootstrap,
            "--input-topic",
            plan.input_topic,
            "--output-topic",
            plan.output_topic,
            "--consumer-group",
            plan.application_id,
            "--state-dir",
            str(plan.work_dir / "state"),
            "--guarantee",
            guarantee,
            "--count",
            str(plan.events),
            "--instances",
            str(instances),
            *(("--compression", compression) if compression else ()),
        ]

    one = instances == 1
    compressed = f", outputs and changelog {compression}-compressed" if compression else ""
    return Runner(
        f"quix-{short}"
        + ("" if one else f"-{instances}")
        + (f"-{compression}" if compression else ""),
        f"Quix Streams 3.28 {guarantee}, RocksDB state (5 s commits), "
        + ("one instance" if one else f"{instances} instances in one group")
        + compressed,
        command,
        state_topic=_quix_changelog,
        own_topic=_quix_topic,
        store_dirs=_local_state,
        changelog_codec=compression or "none",
        unavailable=why_not,
        processes=str(instances),
    )


def embedded_runner(workers: str | None, has_workers: bool, extra: tuple[str, ...]) -> Runner:
    flags: tuple[str, ...] = ()
    if workers is None:
        key, label = "embedded", "embedded engine, EOS, default workers"
        processes = f"{os.cpu_count() or 1} (one per CPU)"
    else:
        key, label = f"embedded-w{workers}", f"embedded engine, EOS, --workers {workers}"
        flags = ("--workers", workers)
        processes = workers
    missing = workers is not None and not has_workers
    return Runner(
        key,
        label + (f" {' '.join(extra)}" if extra else ""),
        lambda plan: hydrator_command(plan, "embedded", *flags, *extra),
        state_topic=_embedded_changelog,
        own_topic=_app_topic,
        store_dirs=_local_state,
        # the changelog topic's own compression.type (hydrator/topology/layout.py): a broker
        # that honours it (Apache Kafka) recompresses the producer's batches to it
        changelog_codec=CHANGELOG_COMPRESSION,
        unavailable="n/a (no --workers)" if missing else None,
        processes=processes,
    )


# Without Spark's Kafka connector's jars (--spark-kafka-jars) its runners cannot run.
NO_CONNECTOR = "n/a (no --spark-kafka-jars)"
_COPY_KINDS = {
    "spark-copy": ("python", False, "Spark copy: the engine's Python Kafka source -> sink"),
    "spark-copy-connector": ("connector", False, "Spark copy: Spark's Kafka connector"),
    "spark-pass-through": (
        "connector",
        True,
        "Spark pass-through: connector -> applyInPandasWithState by key, no state -> connector",
    ),
}


def spark_copy_runner(batch: int, key: str = "spark-copy", jars: str | None = None) -> Runner:
    """A Spark copy (bench/spark_copy.py): on the Python Kafka I/O, on Spark's Kafka connector
    (Spark's limit), or through a pass-through applyInPandasWithState on the connector."""
    kafka_io, pass_through, label = _COPY_KINDS[key]
    connector = kafka_io == "connector"
    return Runner(
        key,
        f"{label}, local[2]",
        lambda plan: [
            sys.executable,
            "-m",
            "bench.spark_copy",
            "--bootstrap-servers",
            plan.bootstrap,
            "--input-topic",
            plan.input_topic,
            "--output-topic",
            plan.output_topic,
            "--checkpoint",
            str(plan.work_dir / "checkpoint"),
            "--master",
            "local[2]",
            "--max-offsets-per-trigger",
            str(batch),
            "--kafka-io",
            kafka_io,
            *(["--jars", jars or ""] if connector else []),
            *(["--pass-through"] if pass_through else []),
        ],
        hydrates=False,
        unavailable=NO_CONNECTOR if connector and not jars else None,
        processes="local[2]",
    )


def spark_runner(
    batch: int, extra: tuple[str, ...], kafka_io: str = "python", jars: str | None = None
) -> Runner:
    """The Spark engine on one Kafka I/O: `spark` on the Python one, `spark-connector` on
    Spark's Kafka connector."""
    connector = kafka_io == "connector"
    io_args = ["--spark-kafka-io", kafka_io]
    io = "the Python Kafka I/O"
    if connector:
        io_args += ["--spark-conf", f"spark.jars={jars or ''}"]
        io = "Spark's Kafka connector"
    return Runner(
        "spark-connector" if connector else "spark",
        f"Spark engine on {io}, local[2], RocksDB state",
        lambda plan: hydrator_command(
            plan,
            "spark",
            "--master",
            "local[2]",
            "--max-offsets-per-trigger",
            str(batch),
            "--spark-conf",
            "spark.ui.enabled=false",
            *io_args,
            *extra,
        ),
        own_topic=_app_topic,
        state_dirs=lambda plan: [
            plan.work_dir / "state" / plan.application_id / "checkpoint" / "state"
        ],
        unavailable=NO_CONNECTOR if connector and not jars else None,
        processes="local[2]",
        notes=(f"Spark reads micro-batches of up to {batch} records (--spark-batch).",),
    )
