"""Downtime is not processing time: timeouts that ran out while the engine was stopped must not
fire before the engine has read what arrived meanwhile.

Each test stops the engine, writes the event that settles a waiting key while it is down, waits
longer than the timeout, and restarts it (`--available-now`).
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4
# Long enough that the time the first run spends after processing (up to a progress interval)
# does not use it up; the downtime is longer.
TIMEOUT = "10s"
DOWNTIME_S = 12.0


def _processed(records: int, parked: int) -> str:
    """The progress line once `records` inputs are processed and committed."""
    return rf"parked {parked}, dead letters \d+, records {records}, commits [1-9]"


def test_a_key_change_whose_delete_arrives_during_downtime_is_filled_after_restart(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    old = 1
    new = next(
        k
        for k in range(2, 1000)
        if partition_for_key(key_bytes(k), PARTITIONS)
        != partition_for_key(key_bytes(old), PARTITIONS)
    )
    table = ToastTable(doc_size=500)
    insert = table.insert(old)
    delete, tombstone, create = table.change_key(old, new)
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--handoff-timeout",
        TIMEOUT,
        output_topic=output,
    )

    # The old row is known and the CREATE under the new key parks, waiting for the old image.
    # (One process, --workers 1: the two keys' partitions, and so their counts, in one progress
    # line.)
    produce(bootstrap, source, [insert, create])
    with HydratorProcess([*args, "--workers", "1"], tmp_path / "first.log") as first:
        first.wait_for_log(_processed(records=2, parked=1))
        assert first.terminate() == 0

    # The DELETE that carries the old image to the new key comes while the engine is down, and
    # the engine stays down longer than the handoff timeout.
    produce(bootstrap, source, [delete, tombstone])
    time.sleep(DOWNTIME_S)
    done = run_to_completion([*args, "--available-now"])
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output)
    created = [out for out in outputs if out.key == key_bytes(new)]
    assert len(created) == 1, [out.value for out in outputs]
    lsn, after = after_of(created[0].value)
    assert created[0].header("hydrator.unresolved") is None, done.stderr
    assert after == table.expected_after[lsn]
    app_repeats(kafka_broker, unique_name, [output])


def test_a_tombstone_outlives_downtime_longer_than_its_retention(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=500)
    insert = table.insert(7)
    update = table.update(7, touch_doc=True)
    delete = table.delete(7)
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--tombstone-retention",
        TIMEOUT,
        output_topic=output,
    )

    produce(bootstrap, source, [insert, delete])
    with HydratorProcess(args, tmp_path / "first.log") as first:
        first.wait_for_log(_processed(records=2, parked=0))
        assert first.terminate() == 0

    # While the engine is down (longer than the retention), a late event from before the delete
    # turns up: the delete's tombstone must still drop it.
    produce(bootstrap, source, [update])
    time.sleep(DOWNTIME_S)
    done = run_to_completion([*args, "--available-now"])
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output)
    lsns = [orjson.loads(out.value)["source"]["lsn"] for out in outputs]
    assert lsns == [1, 3], done.stderr  # the insert and the delete; the late update dropped
    app_repeats(kafka_broker, unique_name, [output])
