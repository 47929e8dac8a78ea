"""Spark engine, idle: without input no micro-batch runs (Spark's no-data batches are off), yet
processing-time timeouts fire on time while the stream is quiet: the driver makes a batch run,
with a tick record, only when a timeout can be due (hydrator/engines/spark/timeouts.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.harness.cdc_events import ToastTable, key_bytes
from tests.harness.hydrator_process import HydratorProcess
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, _wait_for_outputs, spark_args

pytestmark = pytest.mark.integration

HANDOFF_TIMEOUT_S = 10
RETENTION_S = 20
# How late a timeout may fire on a loaded machine: the tick's micro-batch has to run.
LATE_S = 25
BATCH = re.compile(r"hydrator\.spark: batch (\d+): ")


def _wait_for_log(engine: HydratorProcess, pattern: str, timeout_s: float) -> float:
    """The moment `pattern` shows in the log."""
    engine.wait_for_log(pattern, timeout_s=timeout_s)
    return time.monotonic()


def test_an_idle_query_runs_no_batch_and_its_timeouts_still_fire_on_time(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    table = ToastTable(doc_size=500)
    table.insert(5)  # known to the table model only: the CREATE of key 6 waits for nothing
    *_, create = table.change_key(5, 6)
    records = [table.insert(1), table.delete(1), create]
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.items.hydrated"
    create_topic(bootstrap, source, 2)
    args = spark_args(bootstrap, unique_name, [source], tmp_path / "state")
    args += ["--handoff-timeout", f"{HANDOFF_TIMEOUT_S}s"]
    args += ["--tombstone-retention", f"{RETENTION_S}s"]
    args[args.index("--progress-interval") + 1] = "2s"
    produce(bootstrap, source, records)

    with HydratorProcess(args, tmp_path / "engine.log") as engine:
        # the insert and the delete come out; the CREATE parks and the tombstone is kept
        _wait_for_outputs(bootstrap, output, 2, engine, timeout_s=SPARK_TIMEOUT_S)
        processed = time.monotonic()
        released = _wait_for_log(engine, r"handoff timeouts 1", HANDOFF_TIMEOUT_S + LATE_S + 5)
        assert released - processed <= HANDOFF_TIMEOUT_S + LATE_S, engine.log[-4000:]
        expired = _wait_for_log(engine, r"tombstones expired 1", RETENTION_S + LATE_S + 5)
        assert expired - processed <= RETENTION_S + LATE_S, engine.log[-4000:]
        (late,) = [o for o in read_topic(bootstrap, output) if o.key == key_bytes(6)]
        assert late.header("hydrator.unresolved") == b"doc"

        # Nothing armed now: the progress line keeps coming, no batch runs.
        quiet_from = len(engine.log)
        time.sleep(12)
        batches = {int(n) for n in BATCH.findall(engine.log[quiet_from:])}
        assert len(batches) == 1, engine.log[-4000:]
        assert engine.terminate(timeout_s=120) == 0, engine.log[-4000:]
