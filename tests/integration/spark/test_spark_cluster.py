"""The Spark engine on a real standalone cluster (a master and two workers on loopback): submitted
with `spark-submit`, its checkpoint on a path every worker reaches (a file: URI), a stream that
keeps arriving while one executor JVM is SIGKILLed (Spark retries its tasks, the worker starts a
new executor) and then the driver is killed and started again (`hydrator run --master spark://`).
With Spark's Kafka connector in the tests (tests/harness/spark_kafka.py) both drivers run on it,
its jars shipped to the executors (`spark-submit --jars`, `--spark-conf spark.jars=`).

At the end every input came out (by `hydrator.source`), hydrated correctly, in per-key order;
every duplicate is an identical copy of a record of one of the (at most two) micro-batches the
failures interrupted, read back from the checkpoint's offset log."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from hydrator.spark_app import SCRIPT
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import cli_command
from tests.harness.kafka import Broker
from tests.harness.spark_cluster import SPARK_HOME, Driver, SparkCluster, spark_cluster
from tests.harness.spark_kafka import connector_jars
from tests.harness.topics import BackgroundProducer, Consumed, create_topic, end_offsets, read_topic
from tests.integration.spark.test_spark_engine import spark_args

pytestmark = pytest.mark.integration

PARTITIONS = 2
BATCH_LIMIT = 300  # --max-offsets-per-trigger: input records per micro-batch
KEYS, UPDATES_PER_KEY = 100, 11
STREAM_S = 30.0  # the stream keeps arriving this long
# A quiet machine needs a fraction of it (Spark's start-up, a micro-batch on a worker's core);
# shared with other test runs, a batch has taken over a minute.
WAIT_S = 400
# Spark settings a cluster needs from its user: executors small enough for a worker's 2 GB, and
# the workers' Python (all on this machine: this interpreter, which has the package).
CLUSTER_CONF = {
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.pyspark.python": sys.executable,
}


def test_a_lost_executor_and_a_restarted_driver_lose_nothing(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    output = f"{source}.hydrated"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=1000)
    records = list(table.workload(keys=KEYS, updates_per_key=UPDATES_PER_KEY))
    checkpoint = tmp_path / "state" / unique_name / "checkpoint"
    hydrator_args = spark_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--max-offsets-per-trigger",
        str(BATCH_LIMIT),
    )
    # the checkpoint on a location all workers share, given as a URI
    hydrator_args[hydrator_args.index("--state-dir") + 1] = f"file://{tmp_path}/state"
    del hydrator_args[hydrator_args.index("--master") : hydrator_args.index("--master") + 2]

    with spark_cluster(tmp_path / "cluster") as cluster:
        producer = BackgroundProducer(bootstrap, source, records, seconds=STREAM_S)
        producer.start()
        submit = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url]
        for name, value in CLUSTER_CONF.items():
            submit += ["--conf", f"{name}={value}"]
        jars = connector_jars()
        if jars:
            submit += ["--jars", ",".join(jars)]
        first = Driver([*submit, str(SCRIPT), *hydrator_args], cluster, tmp_path / "driver-1.log")

        _wait_for_outputs(bootstrap, output, len(records) // 6, first, cluster)
        victim = cluster.wait_for_executors(2, timeout_s=WAIT_S)[0]
        cut = {_batch_in_flight(checkpoint)}
        os.kill(victim, signal.SIGKILL)
        cut.add(_batch_in_flight(checkpoint))  # one may have started in between
        at_kill = _output_count(bootstrap, output)
        # the worker starts a replacement; the stream goes on
        _wait_until(
            lambda: cluster.launched_executors() >= 3, "a replacement executor", cluster, WAIT_S
        )
        _wait_for_outputs(bootstrap, output, at_kill + BATCH_LIMIT, first, cluster)

        first.kill()
        assert not first.alive()
        cut.add(_batch_in_flight(checkpoint))  # the one the restarted driver runs again
        run = cli_command([*hydrator_args, "--master", cluster.master_url])
        run += [f"--spark-conf={name}={value}" for name, value in CLUSTER_CONF.items()]
        second = Driver(run, cluster, tmp_path / "driver-2.log")
        placed = producer.join()
        sources = {f"{source}:{p}:{o}" for p, o in placed}
        outputs = _wait_for_sources(bootstrap, output, sources, second, cluster)
        assert second.terminate() == 0, second.log[-5000:]
        kafka_io = "Spark's Kafka connector" if jars else "Python Kafka source"
        assert all(f"Kafka I/O: {kafka_io}" in d.log for d in (first, second))
        executors_launched = cluster.launched_executors()
    assert not cluster.leftovers(), "processes of the cluster or its drivers outlived it"

    duplicates = _check_outputs(outputs, sources, table)
    retried = _batches_of(duplicates, checkpoint)
    # The executor's kill retries tasks of the batch then in flight; the driver's kill repeats
    # the batch then in flight. (A batch planned but not started yet has written nothing.)
    cut.discard(None)
    assert retried <= cut, f"duplicates from batches {sorted(retried)}; kills cut {sorted(cut)}"
    assert len(duplicates) <= 2 * BATCH_LIMIT
    print(
        f"spark cluster: events {len(records)}, outputs {len(outputs)}, duplicates "
        f"{len(duplicates)} from batches {sorted(retried)} (batch limit {BATCH_LIMIT}; in flight "
        f"at the kills: {sorted(cut)}), executors launched {executors_launched}, "
        f"{time.monotonic() - started:.0f} s"
    )


def _check_outputs(outputs: list[Consumed], sources: set[str], table: ToastTable) -> list[str]:
    """Every input once at least, each output hydrated right, copies identical, per-key order
    kept; returns the sources written more than once (one entry per extra copy)."""
    first_by_source: dict[str, bytes | None] = {}
    duplicates = []
    per_key: dict[bytes | None, list[int]] = defaultdict(list)
    for out in outputs:
        src = out.header(HEADER_SOURCE).decode()
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], f"{src} (lsn {lsn}) wrongly hydrated"
        if src in first_by_source:
            duplicates.append(src)
            assert out.value == first_by_source[src], f"{src} re-emitted differently"
        else:
            first_by_source[src] = out.value
            per_key[out.key].append(lsn)
    missing = sources - set(first_by_source)
    assert not missing, f"lost {len(missing)} records: {sorted(missing)[:20]}"
    assert set(first_by_source) <= sources
    assert all(lsns == sorted(lsns) for lsns in per_key.values()), "a key's events reordered"
    return duplicates


def _batch_in_flight(checkpoint: Path) -> int | None:
    """The micro-batch planned (in the offset log) and not committed yet, if any."""

    def batch_ids(log: str) -> list[int]:
        folder = checkpoint / log
        return (
            [int(f.name) for f in folder.iterdir() if f.name.isdigit()] if folder.exists() else []
        )

    planned, committed = (
        max(batch_ids("offsets"), default=-1),
        max(batch_ids("commits"), default=-1),
    )
    return planned if planned > committed else None


def _batches_of(duplicates: list[str], checkpoint: Path) -> set[int]:
    """The micro-batches (by the checkpoint's offset log: each batch's end offsets) that read the
    duplicated records."""
    ends: list[tuple[int, dict[str, dict[str, int]]]] = []
    for log in (checkpoint / "offsets").iterdir():
        if log.name.isdigit():
            ends.append((int(log.name), json.loads(log.read_text().splitlines()[-1])))
    ends.sort()
    batches = set()
    for src in duplicates:
        topic, partition, offset = src.rsplit(":", 2)
        batch = next(
            (
                batch_id
                for batch_id, end in ends
                if int(offset) < end.get(topic, {}).get(partition, -1)
            ),
            None,
        )
        assert batch is not None, f"{src} is in no batch of the offset log"
        batches.add(batch)
    return batches


def _output_count(bootstrap: str, topic: str) -> int:
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except Exception:
        return 0  # the engine creates the output topic when it starts


def _wait_until(
    condition: Callable[[], bool], what: str, cluster: SparkCluster, timeout_s: float = 120
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout_s}s:\n{cluster.logs()}")


def _wait_for_outputs(
    bootstrap: str,
    topic: str,
    at_least: int,
    driver: Driver,
    cluster: SparkCluster,
    timeout_s: float = WAIT_S,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _output_count(bootstrap, topic) >= at_least:
            return
        assert driver.alive(), driver.log[-5000:]
        time.sleep(0.5)
    raise AssertionError(
        f"fewer than {at_least} outputs after {timeout_s}s:\n{driver.log[-5000:]}\n{cluster.logs()}"
    )


def _wait_for_sources(
    bootstrap: str,
    topic: str,
    sources: set[str],
    driver: Driver,
    cluster: SparkCluster,
    timeout_s: float = WAIT_S,
) -> list[Consumed]:
    """Read the output topic until every input has come out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if _output_count(bootstrap, topic) >= len(sources):
            outputs = read_topic(bootstrap, topic)
            if sources <= {out.header(HEADER_SOURCE).decode() for out in outputs}:
                return outputs
        assert driver.alive(), driver.log[-5000:]
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not every input out after {timeout_s}s:\n{driver.log[-5000:]}\n{cluster.logs()}"
            )
        time.sleep(2)
