"""Two instances with one application id split the partitions and produce what one would."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import ToastTable, key_bytes
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import Consumed, create_topic, end_offsets, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4


def test_two_instances_split_partitions(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """The second instance joins while the first is busy: the rebalance commits the open batch
    and hands partitions over; the outputs are exactly once and equal to one instance's."""
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=1000)
    records = list(table.workload(keys=100, updates_per_key=40))
    # Key changes across instances: keys 0 and 1 move to keys owned by other partitions.
    for old in (0, 1):
        new = next(k for k in range(1000, 2000) if _partition(k) != _partition(old))
        records += table.change_key(old, new)
        records.append(table.update(new))

    two = f"{unique_name}-two"
    args = [
        run_args(bootstrap, two, [source], tmp_path / f"state-{i}", output_topic=f"{two}.out")
        for i in range(2)
    ]
    with (
        HydratorProcess(args[0], tmp_path / "a.log") as a,
        HydratorProcess(args[1], tmp_path / "b.log", start=False) as b,
    ):
        a.wait_for_log(r"assigned partitions \[0, 1, 2, 3\]")
        producing = threading.Thread(target=_produce_paced, args=(bootstrap, source, records))
        producing.start()
        time.sleep(1)
        b.start()
        _wait_until_split(a, b)
        producing.join()
        _wait_for_outputs(bootstrap, f"{two}.out", len(records), [a, b])
        assert a.terminate() == 0, a.log
        assert b.terminate() == 0, b.log
        assert a.records_processed() > 0 and b.records_processed() > 0
    outputs = read_topic(bootstrap, f"{two}.out")
    sources = [o.header(HEADER_SOURCE) for o in outputs]
    assert len(sources) == len(set(sources)) == len(records), "exactly once across a rebalance"
    split = _by_key(outputs)

    one = f"{unique_name}-one"
    done = run_to_completion(
        run_args(
            bootstrap,
            one,
            [source],
            tmp_path / "state-one",
            "--available-now",
            output_topic=f"{one}.out",
        )
    )
    assert done.returncode == 0, done.stderr
    assert split == _by_key(read_topic(bootstrap, f"{one}.out"))


def _produce_paced(bootstrap: str, topic: str, records: list, seconds: float = 6) -> None:
    chunks = 30
    produce(bootstrap, topic, records, pace=(len(records) // chunks + 1, seconds / chunks))


def _partition(key: int) -> int:
    return partition_for_key(key_bytes(key), PARTITIONS)


def _by_key(outputs: list[Consumed]) -> dict[bytes | None, list[tuple]]:
    """Each key's outputs in order, with where they went and what they carry."""
    grouped: dict[bytes | None, list[tuple]] = defaultdict(list)
    for out in outputs:
        grouped[out.key].append((out.partition, out.value, out.headers))
        assert out.header(HEADER_SOURCE) is not None
    return dict(grouped)


def _wait_until_split(a: HydratorProcess, b: HydratorProcess, timeout_s: float = 60) -> None:
    """Both members hold partitions, and together all of them, after the last rebalance."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        mine, theirs = a.assigned(), b.assigned()
        if mine and theirs and sorted(mine + theirs) == list(range(PARTITIONS)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no split assignment:\n{a.log}\n----\n{b.log}")


def _wait_for_outputs(
    bootstrap: str, topic: str, count: int, processes: list[HydratorProcess], timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # The log end is a cheap first check; only committed records count.
        if (
            sum(end_offsets(bootstrap, topic).values()) >= count
            and len(read_topic(bootstrap, topic, timeout_s=2)) >= count
        ):
            return
        for process in processes:
            assert process.process.poll() is None, process.log
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} outputs in {topic}")
