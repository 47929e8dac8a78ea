"""`--available-now` ends only when the whole group has processed what was there at its start,
not when this instance's own partitions are done."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4


def test_available_now_right_after_a_killed_instance_processes_everything(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """The killed member still holds its partitions in the group until its session expires; the
    new run may be given only some partitions at first and must wait for the rest."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=300)
    records = list(table.workload(keys=400, updates_per_key=4))
    head, middle, tail = records[:600], records[600:1200], records[1200:]
    placed = produce(bootstrap, source, head)

    state_dir = tmp_path / "state"
    args = run_args(bootstrap, unique_name, [source], state_dir, output_topic=output)
    # The killed instance is one process (--workers 1) holding every partition; the run after
    # it has the default workers.
    with HydratorProcess([*args, "--workers", "1"], tmp_path / "killed.log") as first:
        first.wait_for_log(r"assigned partitions \[0, 1, 2, 3\]", timeout_s=90)
        # the stream keeps arriving while it runs; kill it in the middle
        placed += produce(bootstrap, source, middle, pace=(100, 0.1))
        first.kill()
    placed += produce(bootstrap, source, tail)

    started = time.monotonic()
    done = run_to_completion([*args, "--available-now"], timeout_s=240)
    assert done.returncode == 0, done.stderr[-5000:]
    elapsed = time.monotonic() - started

    outputs = read_topic(bootstrap, output)
    seen = {o.header(HEADER_SOURCE).decode() for o in outputs}
    missing = [f"{source}:{p}:{o}" for p, o in placed if f"{source}:{p}:{o}" not in seen]
    assert not missing, (
        f"{len(missing)} of {len(placed)} inputs have no output after {elapsed:.0f}s "
        f"(first: {missing[:3]}):\n{done.stderr[-3000:]}"
    )
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]


HOLDER = """
import sys
from confluent_kafka import Consumer

bootstrap, group, *topics = sys.argv[1:]

def assigned(consumer, partitions):
    print("holding", sorted({(tp.topic, tp.partition) for tp in partitions}), flush=True)

consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1500,
    "partition.assignment.strategy": "range",
    "enable.auto.commit": False,
})
consumer.subscribe(topics, on_assign=assigned)
while True:
    consumer.poll(0.2)  # stays in the group, processes nothing, commits nothing
"""


def test_available_now_waits_for_partitions_a_dead_member_still_holds(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A member that holds partitions and then dies (SIGKILL: it never leaves the group) keeps
    them until its session expires. The run that got the other partitions must not end after
    its own: it waits, gets them once the group takes them back, and processes them."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    handoff = f"{unique_name}-handoff"
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, handoff, PARTITIONS)
    table = ToastTable(doc_size=300)
    placed = produce(bootstrap, source, list(table.workload(keys=200, updates_per_key=3)))

    holder_log = tmp_path / "holder.log"
    with holder_log.open("w") as log:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, bootstrap, unique_name, source, handoff],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "holding [(" not in holder_log.read_text():
            assert time.monotonic() < deadline, holder_log.read_text()
            time.sleep(0.2)
        args = run_args(
            bootstrap,
            unique_name,
            [source],
            tmp_path / "state",
            "--available-now",
            output_topic=output,
        )
        with HydratorProcess(args, tmp_path / "hydrator.log") as run:
            run.wait_for_log(r"assigned partitions \[", timeout_s=90)
            # our part done; the holder's partitions untouched: the run must wait for them
            run.wait_for_log(r"this instance is done; waiting", timeout_s=90)
            assert run.process.poll() is None
            holder.send_signal(signal.SIGKILL)
            code = run.wait(timeout_s=120)
            assert code == 0, run.log[-5000:]
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(10)

    outputs = read_topic(bootstrap, output)
    seen = {o.header(HEADER_SOURCE).decode() for o in outputs}
    missing = [f"{source}:{p}:{o}" for p, o in placed if f"{source}:{p}:{o}" not in seen]
    assert not missing, f"{len(missing)} of {len(placed)} inputs have no output"
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]


def test_two_available_now_runs_of_one_group_both_end(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """Each waits for the other's partitions, through the committed offsets: neither may wait
    forever (say, for the other's transaction markers), and together they process everything."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=300)
    records = list(table.workload(keys=300, updates_per_key=3))
    for old, new in [(1, 1001), (2, 1002), (3, 1003)]:  # handoffs between the instances' tasks
        records += table.change_key(old, new)
    placed = produce(bootstrap, source, records)

    runs = [
        HydratorProcess(
            run_args(
                bootstrap,
                unique_name,
                [source],
                tmp_path / f"state-{i}",
                "--available-now",
                output_topic=output,
            ),
            tmp_path / f"run-{i}.log",
        )
        for i in range(2)
    ]
    try:
        codes = [run.wait(timeout_s=180) for run in runs]
    finally:
        for run in runs:
            run.__exit__(None, None, None)
    assert codes == [0, 0], [run.log[-3000:] for run in runs]
    # Their members (two workers each) ended at about the same time. On Tansu a LeaveGroup from
    # a forming group's leader left the group waiting for it for ever: a later run would hang.
    again = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state-2",
        "--available-now",
        output_topic=output,
    )
    later = run_to_completion(again, timeout_s=180)
    assert later.returncode == 0, later.stderr[-3000:]

    outputs = read_topic(bootstrap, output)
    seen = {o.header(HEADER_SOURCE).decode() for o in outputs}
    with_value = {
        f"{source}:{p}:{o}" for (_, value, _), (p, o) in zip(records, placed, strict=True) if value
    }
    assert with_value <= seen
    for out in (o for o in outputs if o.value is not None):  # tombstones pass through
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]


def test_available_now_waits_for_keys_parked_in_a_stopped_members_partitions(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """Keys parked in partitions whose offsets are all committed show in no offset: the run must
    not end before the group has settled and it owns every partition a stopped member held."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    handoff = f"{unique_name}-handoff"
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, handoff, PARTITIONS)
    table = ToastTable(doc_size=300)
    records = [table.insert(old) for old in range(4)]
    creates = []
    news = iter(range(100, 10_000))
    for old in range(4):  # one key change per partition, whose DELETE never comes
        new = next(n for n in news if partition_for_key(key_bytes(n), PARTITIONS) == old)
        *_, create = table.change_key(old, new)
        creates.append(create)
    placed = produce(bootstrap, source, records + creates)
    created_at = {f"{source}:{p}:{o}" for p, o in placed[len(records) :]}

    # A first run processes everything and stops cleanly: offsets at the end, four keys parked
    # (one process, --workers 1, so that its progress line counts them all)
    first_args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "first",
        "--handoff-timeout",
        "1h",
        "--workers",
        "1",
        output_topic=output,
    )
    with HydratorProcess(first_args, tmp_path / "first.log") as first:
        deadline = time.monotonic() + 90
        while first.records_processed() < len(placed) or "parked 4" not in first.log:
            assert time.monotonic() < deadline, first.log[-3000:]
            time.sleep(0.5)
        assert first.terminate() == 0

    holder_log = tmp_path / "holder.log"
    with holder_log.open("w") as log:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, bootstrap, unique_name, source, handoff],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "holding [(" not in holder_log.read_text():
            assert time.monotonic() < deadline, holder_log.read_text()
            time.sleep(0.2)
        args = run_args(
            bootstrap,
            unique_name,
            [source],
            tmp_path / "second",
            "--available-now",
            "--handoff-timeout",
            "2s",
            output_topic=output,
        )
        with HydratorProcess(args, tmp_path / "second.log") as run:
            run.wait_for_log(r"assigned partitions \[", timeout_s=90)
            run.wait_for_log(r"this instance is done; waiting", timeout_s=90)
            holder.send_signal(signal.SIGKILL)  # dies holding its partitions
            code = run.wait(timeout_s=120)
            assert code == 0, run.log[-5000:]
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(10)

    seen = {o.header(HEADER_SOURCE).decode() for o in read_topic(bootstrap, output)}
    assert created_at <= seen, f"parked CREATEs never emitted: {sorted(created_at - seen)}"
