"""Two instances with one application id split the partitions and produce what one would.

Mid-stream the group rebalances twice: a second instance joins (scale out: the first hands over
half of its tasks, committing its open batch) and later leaves (scale in: the first takes them
back and must restore the state the second wrote from the changelog). Key changes keep moving
rows between partitions owned by different instances throughout. The result must be exactly
once and, key by key, byte for byte what a single instance produces.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import Record, ToastTable, after_of, key_bytes
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import Consumed, create_topic, end_offsets, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4
ALL = r"assigned partitions \[0, 1, 2, 3\]"
PRODUCE_SECONDS = 15.0


def test_two_instances_with_a_join_and_a_leave_mid_stream(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=1000)
    records = _workload(table)

    two = f"{unique_name}-two"
    # One process per instance (--workers 1): the test follows the tasks of whole instances as
    # one joins and leaves (their workers would split them further).
    args = [
        run_args(
            bootstrap,
            two,
            [source],
            tmp_path / f"state-{i}",
            "--workers",
            "1",
            output_topic=f"{two}.out",
        )
        for i in range(2)
    ]
    with (
        HydratorProcess(args[0], tmp_path / "a.log") as a,
        HydratorProcess(args[1], tmp_path / "b.log", start=False) as b,
    ):
        a.wait_for_log(ALL)
        producing = threading.Thread(target=_produce_paced, args=(bootstrap, source, records))
        producing.start()
        time.sleep(1)
        b.start()
        _wait_until_split(a, b)
        time.sleep(2)  # let b process (and write changelog) for a while
        assert b.terminate() == 0, b.log
        assert producing.is_alive(), "the stream ended before the second rebalance"
        _wait_for_log_after(a, ALL, after=_count(a, ALL))
        producing.join()
        _wait_for_outputs(bootstrap, f"{two}.out", len(records), [a])
        assert a.terminate() == 0, a.log
    assert a.records_processed() > 0 and b.records_processed() > 0
    # b restored the tasks a had written; a restored them back from what b wrote
    assert "restored" in b.log
    assert re.search(r"restored [1-9]\d* records", _leading_to_last(a, ALL)), a.log

    outputs = read_topic(bootstrap, f"{two}.out")
    assert app_repeats(kafka_broker, two, [f"{two}.out"]) == 0, "exactly once across rebalances"
    assert len(outputs) == len(records), "nothing lost across rebalances"
    for out in outputs:
        if out.value is not None:
            lsn, after = after_of(out.value)
            assert after == table.expected_after[lsn], f"lsn {lsn}"
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


def _workload(table: ToastTable, keys: int = 100, rounds: int = 40) -> list[Record]:
    """Inserts, then rounds of updates; every ~300 records a key moves to a new key in the other
    half of the partitions (with two members: owned by the other instance)."""
    live = list(range(keys))
    records = [table.insert(key) for key in live]
    next_key = 1000
    for round_ in range(rounds):
        for i, key in enumerate(list(live)):
            records.append(table.update(key, touch_doc=(round_ + key) % 5 == 0))
            if len(records) % 300 == 0:
                while _half(next_key) == _half(key):
                    next_key += 1
                records += table.change_key(key, next_key)
                records.append(table.update(next_key))
                live[i] = next_key
                next_key += 1
    return records


def _half(key: int) -> int:
    return partition_for_key(key_bytes(key), PARTITIONS) // 2


def _produce_paced(bootstrap: str, topic: str, records: list[Record]) -> None:
    chunks = 60
    produce(bootstrap, topic, records, pace=(len(records) // chunks + 1, PRODUCE_SECONDS / chunks))


def _by_key(outputs: list[Consumed]) -> dict[bytes | None, list[tuple]]:
    """Each key's outputs in order, with where they went and what they carry."""
    grouped: dict[bytes | None, list[tuple]] = defaultdict(list)
    for out in outputs:
        grouped[out.key].append((out.partition, out.value, out.headers))
        assert out.header(HEADER_SOURCE) is not None
    return dict(grouped)


def _count(process: HydratorProcess, pattern: str) -> int:
    return len(re.findall(pattern, process.log))


def _leading_to_last(process: HydratorProcess, pattern: str) -> str:
    """The log from the assignment before the last `pattern` up to it: what opening (restoring)
    the tasks of that last assignment logged."""
    log = process.log
    last = [m.start() for m in re.finditer(pattern, log)][-1]
    previous = [m.end() for m in re.finditer(r"assigned partitions", log[:last])]
    return log[previous[-1] if previous else 0 : last]


def _wait_for_log_after(
    process: HydratorProcess, pattern: str, after: int, timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while _count(process, pattern) <= after:
        assert time.monotonic() < deadline, f"no new {pattern!r}:\n{process.log}"
        assert process.process.poll() is None, process.log
        time.sleep(0.1)


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
