"""Stopping `hydrator run --engine spark` as a user does, and what it says while idle: Ctrl-C
(SIGINT to the process group: driver, JVM and Python workers alike) and `kill -INT <driver>`
end it with exit 0 and no stack trace, keeping what was committed; an idle stream keeps
logging its progress line (also after a restart with nothing new), without Spark's
"falling behind" warnings, and the totals line is words, as the embedded engine's."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import App, HydratorProcess
from tests.harness.topics import produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

pytestmark = pytest.mark.integration

PARTITIONS = 2
NOISE = ("Traceback", "Py4J", "INTERNAL_ERROR", "Exception", "falling behind", "state_bytes")
PROGRESS = re.compile(r"hydrator\.spark: (?:batch \d+|no batch yet): \d+ records/s; records \d+")


def _after_the_signal(log: str) -> str:
    return log[log.index("stopping the query") :]


def _quiet(log: str) -> None:
    for noise in NOISE:
        assert noise not in log, f"{noise!r} in the log:\n{log[-6000:]}"


def _progress_lines(log: str) -> int:
    return len(PROGRESS.findall(log))


def _wait_for_progress_lines(engine: HydratorProcess, since: int, more: int) -> None:
    """`more` progress lines after the first `since` characters of the log."""
    deadline = time.monotonic() + 60
    while _progress_lines(engine.log[since:]) < more:
        assert engine.process.poll() is None, engine.log[-6000:]
        assert time.monotonic() < deadline, f"no progress line while idle:\n{engine.log[-6000:]}"
        time.sleep(0.5)


def _wait_for_committed(bootstrap: str, output: str, inputs: int, engine: HydratorProcess) -> None:
    """Until `inputs` input records have a committed (read_committed) output."""
    deadline = time.monotonic() + SPARK_TIMEOUT_S
    while True:
        try:
            outputs = read_topic(bootstrap, output)
        except Exception:  # the engine creates the output topic when it starts
            outputs = []
        if len({out.header(HEADER_SOURCE) for out in outputs}) >= inputs:
            return
        assert engine.process.poll() is None, engine.log[-6000:]
        assert time.monotonic() < deadline, f"fewer than {inputs} outputs:\n{engine.log[-6000:]}"
        time.sleep(1)


def _outputs_intact(bootstrap: str, output: str, table: ToastTable, committed: int) -> None:
    """Every record committed has its hydrated output (at least once), and every output is the
    full row (also those of a batch the stop abandoned, if it wrote any)."""
    sources = set()
    for out in read_topic(bootstrap, output):
        sources.add(out.header(HEADER_SOURCE))
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]
    assert len(sources) >= committed, f"{len(sources)} of {committed} inputs have an output"


def test_ctrl_c_and_kill_int_stop_spark_cleanly_and_an_idle_run_says_so(
    app: App, tmp_path: Path
) -> None:
    bootstrap, source = app.bootstrap, app.create_source(PARTITIONS)
    output = f"{source}.hydrated"
    table = ToastTable(doc_size=2500)
    first = [table.insert(k) for k in range(30)] + [table.update(k) for k in range(30)]
    produce(bootstrap, source, first)
    args = spark_args(bootstrap, app.name, [source], app.state_dir)
    args[args.index("--progress-interval") + 1] = "2s"

    # Ctrl-C at the terminal: SIGINT to the driver's whole process group.
    with HydratorProcess(args, tmp_path / "first.log", own_group=True) as engine:
        _wait_for_committed(bootstrap, output, len(first), engine)
        # Idle now: the progress line keeps coming.
        _wait_for_progress_lines(engine, len(engine.log), 2)
        code = engine.interrupt(group=True, timeout_s=SPARK_TIMEOUT_S)
        assert code == 0, engine.log[-6000:]
    log = engine.log
    assert "stopping the query after its current batch (SIGINT)" in log
    _quiet(log)
    assert re.search(r"totals: records \d+, events \d+, filled columns \d+", log), log[-3000:]
    _outputs_intact(bootstrap, output, table, len(first))

    # Restarted with nothing new: it says it is alive; then `kill -INT <driver>` mid-stream.
    with HydratorProcess(args, tmp_path / "second.log", own_group=True) as engine:
        match = engine.wait_for_log(r"query \S+ started", timeout_s=SPARK_TIMEOUT_S)
        _wait_for_progress_lines(engine, match.end(), 2)
        second = [table.update(k, touch_doc=k % 2 == 0) for k in range(30)]
        produce(bootstrap, source, second)
        _wait_for_committed(bootstrap, output, len(first) + len(second), engine)
        # more, and the signal while their batch is likely running
        produce(bootstrap, source, [table.update(k) for k in range(30)])
        time.sleep(1)
        code = engine.interrupt(timeout_s=SPARK_TIMEOUT_S)
        assert code == 0, engine.log[-6000:]
    log = engine.log
    assert "stopping the query after its current batch (SIGINT)" in log
    _quiet(log)
    assert "totals:" in _after_the_signal(log)
    _outputs_intact(bootstrap, output, table, len(first) + len(second))
