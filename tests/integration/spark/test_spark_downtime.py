"""Spark engine: downtime is not processing time. Spark arms processing-time timeouts by the
wall clock, so after an outage longer than a timeout they fire in the first batch; the group
function must find them not due yet and arm them again.

Each test stops the engine, writes the event that settles a waiting key while it is down, waits
longer than the timeout, and restarts it (`--available-now`).
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.hydrator_process import HydratorProcess, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, _wait_for_outputs, spark_args

pytestmark = pytest.mark.integration

PARTITIONS = 4
# Longer than what the first run spends after processing (noticing the outputs, stopping) plus
# the restarted query's first batches; the downtime is longer still.
TIMEOUT = "30s"
DOWNTIME_S = 35.0


def test_a_key_change_whose_delete_arrives_during_downtime_is_filled_after_restart(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    output = f"{source}.hydrated"
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
    args = spark_args(bootstrap, unique_name, [source], tmp_path / "state")
    args += ["--handoff-timeout", TIMEOUT]

    # The old row is known and the CREATE under the new key parks, waiting for the old image.
    produce(bootstrap, source, [insert, create])
    with HydratorProcess(args, tmp_path / "first.log") as first:
        _wait_for_outputs(bootstrap, output, 1, first)
        _wait_for_committed_batch(tmp_path / "state" / unique_name, first)
        assert first.terminate(timeout_s=120) == 0, first.log[-5000:]

    # The DELETE that carries the old image to the new key comes while the engine is down, and
    # the engine stays down longer than the handoff timeout.
    produce(bootstrap, source, [delete, tombstone])
    time.sleep(DOWNTIME_S)
    done = run_to_completion([*args, "--available-now"], timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]

    outputs = read_topic(bootstrap, output)
    created = [out for out in outputs if out.key == key_bytes(new)]
    assert len(created) == 1, [out.value for out in outputs]  # written once: by the restart
    lsn, after = after_of(created[0].value)
    assert created[0].header("hydrator.unresolved") is None, done.stderr[-5000:]
    assert after == table.expected_after[lsn]


def test_a_tombstone_outlives_downtime_longer_than_its_retention(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    output = f"{source}.hydrated"
    create_topic(bootstrap, source, PARTITIONS)
    deleted = 7
    partition = partition_for_key(key_bytes(deleted), PARTITIONS)
    other = next(
        k for k in range(8, 1000) if partition_for_key(key_bytes(k), PARTITIONS) == partition
    )
    table = ToastTable(doc_size=500)
    insert = table.insert(deleted)
    late = table.update(deleted, touch_doc=True)
    delete = table.delete(deleted)
    args = spark_args(bootstrap, unique_name, [source], tmp_path / "state")
    args += ["--tombstone-retention", TIMEOUT]

    produce(bootstrap, source, [insert, delete])
    with HydratorProcess(args, tmp_path / "first.log") as first:
        _wait_for_outputs(bootstrap, output, 2, first)
        _wait_for_committed_batch(tmp_path / "state" / unique_name, first)
        assert first.terminate(timeout_s=120) == 0, first.log[-5000:]

    # While the engine is down (longer than the retention), another key's event and then a late
    # event from before the delete arrive in the same partition. One record per batch: the
    # first batch (the other key) is where Spark fires the tombstone's wall-clock timeout; the
    # late event, in the next batch, must still meet the tombstone and be dropped.
    produce(bootstrap, source, [table.insert(other), late])
    time.sleep(DOWNTIME_S)
    done = run_to_completion(
        [*args, "--available-now", "--max-offsets-per-trigger", "1"], timeout_s=SPARK_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-5000:]

    # at least once: a batch the stop interrupted is written again, with the same source
    unique = {out.header(HEADER_SOURCE): out.value for out in read_topic(bootstrap, output)}
    lsns = sorted(orjson.loads(value)["source"]["lsn"] for value in unique.values())
    assert lsns == [1, 3, 4], done.stderr[-5000:]  # the late update (lsn 2) dropped


def _wait_for_committed_batch(
    app_dir: Path, process: HydratorProcess, timeout_s: float = 120
) -> None:
    """Until the first micro-batch is committed: its state (the parked CREATE, the tombstone) is
    then what a restart starts from, not a batch it runs again."""
    commit = app_dir / "checkpoint" / "commits" / "0"
    deadline = time.monotonic() + timeout_s
    while not commit.exists():
        assert process.process.poll() is None, process.log[-5000:]
        assert time.monotonic() < deadline, f"no {commit} after {timeout_s}s"
        time.sleep(0.2)


def test_a_timeout_fires_once_the_query_has_caught_up(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """The catch-up gate opens: a CREATE whose handoff never comes is released by its timeout."""
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    output = f"{source}.hydrated"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=500)
    table.insert(5)  # known to the table model only: the engine never sees key 5
    *_, create = table.change_key(5, 6)
    args = spark_args(bootstrap, unique_name, [source], tmp_path / "state")
    args += ["--handoff-timeout", "3s", "--available-now"]

    produce(bootstrap, source, [create])
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "caught up with the ends at start" in done.stderr

    (released,) = read_topic(bootstrap, output)
    assert released.header("hydrator.unresolved") == b"doc"
