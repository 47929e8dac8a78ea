"""`--workers 2`: two worker processes under one supervisor hydrate a stream as one process would.

* a clean run: every event hydrated correctly, exactly once (read_committed), both workers at
  work; SIGTERM stops them all and the run exits 0;
* a worker SIGKILLed mid-stream is started again by the supervisor, nothing lost, nothing twice
  (outputs, dead letters, handoffs; on Tansu, where a killed transaction's records stay visible,
  only identical re-emissions: tests/harness/exactly_once.py); then the whole run is SIGKILLed
  (its workers die with it) and a run with one worker finishes the stream, aborting what the
  missing worker left open (on Tansu nothing else would, and read_committed readers would wait
  for ever);
* `--available-now` with two workers exits 0 with everything processed;
* a configuration error in the workers ends the run with exit 2, reported once.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from hydrator.config import default_workers
from hydrator.demo.stream import ChangeRecord, DemoStream
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.stream_checks import check_hydrated, check_key_order, copies_by_source
from tests.harness.topics import (
    BackgroundProducer,
    Headers,
    create_topic,
    end_offsets,
    produce,
    read_topic,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
SEED = 20251123
WORKER_ASSIGNED = re.compile(r"\[worker (\d)\]: assigned partitions \[\d")
# The run's progress line, which the supervisor logs (a worker's lines say [worker N]).
RUN_PROGRESS = re.compile(r"hydrator\.progress: \d+ records/s.* records (\d+), commits")


def _stream(events: int) -> list[ChangeRecord]:
    return DemoStream(seed=SEED, keys=1500, toast_size=100).records(events)


def _tuples(records: list[ChangeRecord]) -> list[tuple[bytes | None, bytes | None, Headers]]:
    return [(r.key, r.value, list(r.headers)) for r in records]


def _fast_rejoin() -> list[str]:
    """A killed member's partitions wait for its session to expire: keep that short."""
    return ["-X", "consumer.session.timeout.ms=2000", "-X", "consumer.heartbeat.interval.ms=500"]


def _workers_assigned(log: str) -> set[int]:
    """The workers that were given partitions."""
    return {int(w) for w in WORKER_ASSIGNED.findall(log)}


def _run_records(log: str) -> int:
    """The records on the run's last progress line."""
    return int(RUN_PROGRESS.findall(log)[-1])


def _wait_for_outputs(bootstrap: str, topic: str, count: int, process: HydratorProcess) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        # the log end is a cheap first check; only committed records count
        if (
            sum(end_offsets(bootstrap, topic).values()) >= count
            and len(read_topic(bootstrap, topic, timeout_s=5)) >= count
        ):
            return
        assert process.process.poll() is None, process.log[-5000:]
        time.sleep(0.5)
    raise AssertionError(f"fewer than {count} outputs in {topic}:\n{process.log[-5000:]}")


def _check(
    broker: Broker,
    application_id: str,
    output: str,
    source: str,
    records: list[ChangeRecord],
    placed: list,
) -> int:
    """Everything hydrated correctly, in per-key order and exactly once (outputs, dead letters,
    handoffs); returns how many repeats Tansu showed (tests/harness/exactly_once.py)."""
    outputs = read_topic(broker.bootstrap_servers, output, timeout_s=60)
    truth, copies = copies_by_source(outputs, records, placed, source)
    for src, outs in copies.items():
        check_hydrated(src, outs[0], truth[src])
    check_key_order(copies)
    return app_repeats(broker, application_id, [output])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie (not yet reaped by anyone) is gone too
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z"


def _wait_gone(pids: list[int], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(_gone(pid) for pid in pids):
        assert time.monotonic() < deadline, f"workers {pids} outlived their supervisor"
        time.sleep(0.1)


def test_two_workers_hydrate_a_stream_exactly_once_and_sigterm_stops_both(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = _stream(12_000)
    head = len(records) // 2
    placed = produce(bootstrap, source, _tuples(records[:head]))
    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--workers", "2", output_topic=output
    )
    with HydratorProcess(args, tmp_path / "run.log") as run:
        producing = BackgroundProducer(bootstrap, source, _tuples(records[head:]), 10, chunks=40)
        producing.start()
        placed += producing.join()
        _wait_for_outputs(bootstrap, output, len(records), run)
        pids = list(run.worker_pids().values())
        assert run.terminate() == 0, run.log[-5000:]
    _wait_gone(pids)
    assert len(pids) == 2
    assert _workers_assigned(run.log) == {0, 1}
    # the run's last line counts both workers' records, as one process would
    assert _run_records(run.log) == len(records), run.log[-3000:]
    repeated = _check(kafka_broker, unique_name, output, source, records, placed)
    assert not repeated, f"a clean run repeated {repeated} outputs"
    assert "Traceback" not in run.log


def test_a_killed_worker_is_started_again_and_nothing_is_lost(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = _stream(30_000)
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        *_fast_rejoin(),
        output_topic=output,
    )

    producing = BackgroundProducer(bootstrap, source, _tuples(records), 30, chunks=100)
    producing.start()
    with HydratorProcess([*args, "--workers", "2"], tmp_path / "run.log") as run:
        run.wait_for_log(r"\[worker 1\]: assigned partitions \[\d", timeout_s=90)
        time.sleep(2)
        killed = run.worker_pids()[1]
        os.kill(killed, signal.SIGKILL)
        restarted = run.wait_for_log(
            rf"worker 1 \(pid {killed}\) was killed by SIGKILL: starting it again"
        )
        # the new worker 1 joins the group and takes partitions again
        run.wait_for_log(
            r"\[worker 1\]: assigned partitions \[", timeout_s=90, since=restarted.end()
        )
        assert run.worker_pids()[1] != killed
        time.sleep(2)
        # now the whole run dies: its workers go with it
        pids = list(run.worker_pids().values())
        run.kill()
    _wait_gone(pids)
    placed = producing.join()

    # One worker now: it must abort what worker 1 left open, or read_committed readers (this
    # run's restore, the check below) would wait for ever on Tansu.
    done = run_to_completion([*args, "--workers", "1", "--available-now"], timeout_s=180)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "aborted what worker 1 of an earlier run may have left open" in done.stderr

    repeated = _check(kafka_broker, unique_name, output, source, records, placed)
    print(
        f"workers test: {len(records)} events, worker 1 SIGKILLed and restarted, then the run "
        f"SIGKILLed; {repeated} identical re-emissions; broker {kafka_broker.kind}"
    )


def test_available_now_with_two_workers_processes_everything_and_exits_0(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = _stream(8_000)
    placed = produce(bootstrap, source, _tuples(records))
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--workers",
        "2",
        "--available-now",
        output_topic=output,
    )
    started = time.monotonic()
    done = run_to_completion(args, timeout_s=180)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-5000:]
    assert re.search(r"worker 0 \(pid \d+\) finished", done.stderr)
    assert re.search(r"worker 1 \(pid \d+\) finished", done.stderr)
    assert _run_records(done.stderr) == len(records), done.stderr[-3000:]
    # the workers held every partition between them: no wait for the group to settle
    assert "waiting up to" not in done.stderr, done.stderr[-5000:]
    repeated = _check(kafka_broker, unique_name, output, source, records, placed)
    assert not repeated
    print(f"available-now with 2 workers: {len(records)} events in {elapsed:.1f} s")


def test_a_configuration_error_ends_the_run_with_2_reported_once(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    args = run_args(
        kafka_broker.bootstrap_servers,
        unique_name,
        [f"{unique_name}.missing"],
        tmp_path / "state",
        "--workers",
        "2",
        output_topic=f"{unique_name}.out",
    )
    done = run_to_completion(args, timeout_s=120)
    assert done.returncode == 2, done.stderr[-5000:]
    assert done.stderr.count("the topic does not exist") == 1, done.stderr
    assert "worker 1 started" not in done.stderr  # worker 0 failed its start-up checks first


@pytest.mark.skipif(default_workers() < 2, reason="one CPU: the default is one worker anyway")
def test_the_default_worker_count_is_no_more_than_the_input_s_partitions(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A one-partition topic (a dev topic) and no --workers: one worker starts, not one per
    CPU with all but one idle; the line says why, and the run hydrates everything."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    records = _stream(300)
    placed = produce(bootstrap, source, _tuples(records))
    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--available-now", output_topic=output
    )
    done = run_to_completion(args, timeout_s=180)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "1 worker: the input has 1 partition" in done.stderr, done.stderr[-3000:]
    assert re.findall(r"worker (\d+) started", done.stderr) == ["0"], done.stderr[-3000:]
    assert _run_records(done.stderr) == len(records), done.stderr[-3000:]
    assert not _check(kafka_broker, unique_name, output, source, records, placed)
