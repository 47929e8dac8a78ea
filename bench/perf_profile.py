"""`python -m bench profile --perf`: where the embedded engine's CPU goes in every thread of it.

cProfile and py-spy see the main thread's Python frames; the engine also spends in threads no
Python profiler samples: librdkafka's broker threads compress what the producer sends (lz4 by
default) and copy records to and from the sockets, RocksDB's flush and compact. Linux `perf`
samples them all, and names the library each sample fell in: the interpreter, the compiled core,
orjson, zstd, librdkafka, libc's allocator and copies, the kernel. So this runs `hydrator run
--available-now` as a child process under `perf record` on the pre-loaded workload and prints its
CPU by thread and by library, and the hottest symbols. Start-up is included: compare shares, and
take costs per event from the marginal bench.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.broker import BrokerChoice, broker, create_topics, delete_topics
from bench.broker import preload as preload_topic
from bench.workload import Workload, WorkloadShape

SAMPLE_HZ = 999
TOP_SYMBOLS = 20

# A library's file name without its version, ABI tag or build hash, for the ones the engine spends
# in; anything else is shown by the name before its first dot.
_LIBRARIES = (
    ("libpython", "Python interpreter"),
    ("_compiled__mypyc", "compiled core (mypyc)"),
    ("librdkafka", "librdkafka"),
    ("cimpl.", "confluent-kafka binding"),
    ("backend_c.", "zstandard"),
    ("_blake2.", "blake2b"),
    ("orjson.", "orjson"),
    ("rocksdict.", "RocksDB (rocksdict)"),
    ("_cmsgpack.", "msgpack"),
    ("_block.", "python-lz4"),  # large values in state under --large-value-compression lz4
    ("_frame.", "python-lz4"),
    ("libc.so", "libc (malloc, memcpy)"),
    ("[kernel", "kernel"),
)
# librdkafka names its threads rdk:broker<id>, one per broker connection, and rdk:main.
_THREAD_GROUPS = ((re.compile(r"rdk:broker"), "librdkafka broker threads"),)


@dataclass(frozen=True)
class Sample:
    """One row of `perf report`: a thread name, library and symbol with its sample count."""

    thread: str
    library: str
    symbol: str
    samples: int


def library_name(dso: str) -> str:
    for prefix, name in _LIBRARIES:
        if dso.startswith(prefix):
            return name
    return dso.split(".", 1)[0] or dso


def thread_name(comm: str, main: str) -> str:
    """The engine's Python threads as one (perf names a thread after its process, which Python
    does not rename: the main loop, its helper threads and, with --workers 2 or more, the
    supervisor and every worker); librdkafka's broker threads as one; the rest as perf names
    them."""
    if comm == main:
        return f"Python threads ({comm})"
    for pattern, name in _THREAD_GROUPS:
        if pattern.match(comm):
            return name
    return comm


def parse_report(text: str) -> list[Sample]:
    """Rows of `perf report --stdio -n --no-children --sort comm,dso,sym` written with a tab as
    the field separator: percent, samples, comm, dso, symbol."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) < 5 or not fields[1].isdigit():
            continue
        symbol = re.sub(r"^\[[.k]\]\s*", "", fields[4])
        rows.append(Sample(fields[2], library_name(fields[3]), symbol, int(fields[1])))
    return rows


def main_thread(rows: Iterable[Sample]) -> str:
    """The comm with the most samples that is none of the libraries' own threads: the engine's
    Python threads (named after the process: `python`, or `hydrator` run as a script)."""
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        if not row.thread.startswith(("rdk:", "rocksdb:")):
            totals[row.thread] += row.samples
    return max(totals, key=totals.__getitem__, default="")


def summary(rows: list[Sample], hz: int = SAMPLE_HZ) -> str:
    """CPU seconds and shares by thread and library, then the hottest symbols (Markdown)."""
    total = sum(row.samples for row in rows) or 1
    main = main_thread(rows)
    by_thread: dict[str, int] = defaultdict(int)
    by_library: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        thread = thread_name(row.thread, main)
        by_thread[thread] += row.samples
        by_library[(thread, row.library)] += row.samples

    def share(samples: int) -> str:
        return f"{100 * samples / total:.1f} %"

    lines = [
        f"{total:,} samples at {hz} Hz: {total / hz:.1f} CPU seconds, start-up included",
        "",
        "| thread | CPU s | share |",
        "|---|---|---|",
    ]
    for thread, samples in sorted(by_thread.items(), key=lambda item: -item[1]):
        lines.append(f"| {thread} | {samples / hz:.1f} | {share(samples)} |")
    lines += ["", "| thread | library | share |", "|---|---|---|"]
    for (thread, library), samples in sorted(by_library.items(), key=lambda item: -item[1]):
        if samples / total >= 0.005:
            lines.append(f"| {thread} | {library} | {share(samples)} |")
    lines += ["", "| share | thread | library | symbol |", "|---|---|---|---|"]
    for row in sorted(rows, key=lambda row: -row.samples)[:TOP_SYMBOLS]:
        thread = thread_name(row.thread, main)
        lines.append(f"| {share(row.samples)} | {thread} | {row.library} | `{row.symbol}` |")
    return "\n".join(lines)


def perf_report(data: Path) -> str:
    done = subprocess.run(
        [
            "perf",
            "report",
            "-i",
            str(data),
            "--stdio",
            "-n",
            "--no-children",
            "--sort",
            "comm,dso,sym",
            "--field-separator",
            "\t",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def run_perf_profile(
    shape: WorkloadShape,
    partitions: int,
    choice: BrokerChoice,
    workers: int,
    out: Path,
    engine_args: list[str],
) -> None:
    if shutil.which("perf") is None:
        raise SystemExit(
            "python -m bench profile --perf: the `perf` command is not installed "
            "(Debian: apt install linux-perf)"
        )
    workload = Workload(shape)
    tag = uuid.uuid4().hex[:8]
    topic = f"bench-perf-{tag}.public.customers"
    out.parent.mkdir(parents=True, exist_ok=True)
    with broker(choice) as kafka, tempfile.TemporaryDirectory() as state_dir:
        create_topics(kafka.bootstrap_servers, [topic], partitions)
        events = ((key, value) for _, key, value in workload.events())
        preload_topic(kafka.bootstrap_servers, topic, events, lambda: None)
        app = f"bench-perf-{tag}"
        command = [
            "perf",
            "record",
            "--quiet",
            "-F",
            str(SAMPLE_HZ),
            "-o",
            str(out),
            "--",
            sys.executable,
            "-m",
            "hydrator.cli",
            "run",
            "--bootstrap-servers",
            kafka.bootstrap_servers,
            "--input-topic",
            topic,
            "--output-topic",
            f"{topic}.out",
            "--state-dir",
            state_dir,
            "--application-id",
            app,
            "--workers",
            str(workers),
            "--available-now",
            *engine_args,
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(
                    f"python -m bench profile --perf: the run exited {done.returncode}:\n"
                    + done.stderr[-3000:]
                )
        finally:
            if choice.bootstrap_servers is not None:  # a throwaway broker takes its topics
                internal = (f"{app}-{kind}" for kind in ("state", "handoff", "dlq"))
                delete_topics(kafka.bootstrap_servers, [topic, f"{topic}.out", *internal])
    print(f"hydrator run --workers {workers} over {shape.events:,} events; perf data: {out}")
    print(summary(parse_report(perf_report(out))))
