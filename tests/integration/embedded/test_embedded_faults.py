"""Faults only a broker that honours transactions shows as they are, each while a stream is
hydrated; after each, a read_committed reader finds every input hydrated correctly, in per-key
order, exactly once (outputs, dead letters, handoffs), nothing lost:

* a node of a three-node cluster, the one coordinating the engine's transactions, SIGKILLed and
  started again mid-run: the engine goes on with the others;
* the only broker SIGKILLed and started again mid-run: the engine waits for it and resumes by
  itself (exactly once unless the broker drops transaction markers at its restart, which Apache
  Kafka 4.3 does when its coordinator acts before the node knows its partitions' leaders: then
  the cut batch's outputs repeat as identical copies);
* an instance SIGSTOPped past its session timeout while the group moves its partitions to the
  other instance, then resumed: what it had produced in its open transaction never becomes
  visible (the other instance's work is what counts), and it rejoins the group;
* a batch slower than the producer's `transaction.timeout.ms`: the broker aborts its
  transaction, the engine finds its producer fenced, starts itself again and redoes the batch.

Apache Kafka only: Tansu keeps records in memory (a killed broker loses them), keeps a dead
transaction's records visible and never times a transaction out (docs/tansu.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hydrator.demo.stream import ChangeRecord, DemoStream
from hydrator.kafka.apache_kafka import ApacheKafka
from tests.harness.exactly_once import app_repeats
from tests.harness.faulty_engine import STALL_COMMIT_S
from tests.harness.hydrator_process import (
    HydratorProcess,
    ServiceProcess,
    run_args,
    wait_until_committed,
)
from tests.harness.kafka import APACHE_KAFKA, TANSU, Broker, kafka_home, own_broker
from tests.harness.kafka_cluster import bootstrap_of, coordinator_of, kafka_cluster
from tests.harness.stream_checks import check_hydrated, check_key_order, copies_by_source
from tests.harness.topics import BackgroundProducer, Headers, create_topic, produce, read_topic

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        kafka_home() is None,
        reason="needs Apache Kafka from a distribution (HYDRATOR_TEST_KAFKA_HOME): these faults "
        "are what Tansu cannot show",
    ),
]

PARTITIONS = 4
SEED = 20261129
ALL = r"assigned partitions \[0, 1, 2, 3\]"
# A member that misses heartbeats for 2 s is out (the tests' broker allows it: Kafka's floor is
# 6 s), so the group moves its partitions soon after it stops.
# What Apache Kafka logs when its transaction coordinator skips markers for partitions it finds
# no leader for (it takes them for deleted).
MARKERS_SKIPPED = "Couldn't find leader endpoint for partitions"
FAST_GROUP = ["-X", "consumer.session.timeout.ms=2000", "-X", "consumer.heartbeat.interval.ms=500"]


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[ApacheKafka]:
    """An Apache Kafka of the test's own, to kill and start again."""
    with own_broker(tmp_path / "broker") as broker:
        assert isinstance(broker, ApacheKafka)
        yield broker


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[ApacheKafka]]:
    home = kafka_home()
    assert home is not None
    with kafka_cluster(home, tmp_path / "cluster") as nodes:
        yield nodes


def test_a_clusters_node_killed_and_restarted_mid_run(
    cluster: list[ApacheKafka], unique_name: str, tmp_path: Path
) -> None:
    """The node that coordinates the engine's transactions (and maybe its group) dies as a
    machine would and comes back: the cluster goes on with the other two (every topic has
    three replicas), and so does the engine, kept up as a service manager keeps it.

    librdkafka 2.16 can keep waiting on the dead coordinator in `send_offsets_to_transaction`,
    past the call's timeout (its issues #5456 and #5511): the engine's watchdog then ends the
    process with 75 (a temporary failure) 30 s past the timeout, and the restarted process
    resumes from what was committed."""
    bootstrap = bootstrap_of(cluster)
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = DemoStream(seed=SEED, keys=500, toast_size=100).records(20_000)
    state_dir = tmp_path / "state"
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--workers", "1", output_topic=output
    )
    with ServiceProcess(args, tmp_path / "run.log") as process:
        process.wait_for_log(ALL, timeout_s=90)
        producing = BackgroundProducer(bootstrap, source, _tuples(records), seconds=25)
        producing.start()
        time.sleep(6)
        process_id = (state_dir / unique_name / "process-id").read_text().strip()
        victim = coordinator_of(cluster, "__transaction_state", f"{unique_name}-{process_id}")
        victim.kill()
        time.sleep(10)
        victim.start()
        placed = producing.join()
        wait_until_committed(bootstrap, unique_name, source, process, timeout_s=300)
        assert process.terminate(timeout_s=60) == 0, process.log
        log = process.log

    assert "Traceback" not in log, log
    print(
        f"cluster: node {victim.node_id} (the transaction coordinator) killed and restarted; "
        f"the engine restarted {process.restarts} times by its service manager"
    )
    _check_exactly_once(bootstrap, unique_name, source, output, records, placed)


def test_a_single_broker_killed_and_restarted_mid_run(
    kafka: ApacheKafka, unique_name: str, tmp_path: Path
) -> None:
    """Everything goes down with the only broker; the engine waits for it and resumes by
    itself, loses nothing and hydrates nothing wrongly.

    Exactly once holds unless the broker drops transaction markers at its restart: a single
    node's transaction coordinator can act before the node knows its partitions' leaders, and
    then skips their markers ("Couldn't find leader endpoint ... likely deleted already" in its
    log), as for a deleted topic. A transaction it so ends without its abort markers is
    committed by the producer's next one (docs/guarantees.md): the outputs of the batch the
    crash cut then repeat, as identical copies. A replicated cluster (the test above) moves the
    partitions' leadership instead."""
    bootstrap = kafka.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = DemoStream(seed=SEED, keys=500, toast_size=100).records(20_000)
    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--workers", "1", output_topic=output
    )
    with HydratorProcess(args, tmp_path / "run.log") as process:
        process.wait_for_log(ALL, timeout_s=60)
        producing = BackgroundProducer(bootstrap, source, _tuples(records), seconds=25)
        producing.start()
        time.sleep(6)
        kafka.kill()
        time.sleep(5)
        kafka.start()
        placed = producing.join()
        wait_until_committed(bootstrap, unique_name, source, process, timeout_s=240)
        pid = process.process.pid
        assert process.terminate(timeout_s=60) == 0, process.log
        log = process.log

    assert pid == process.process.pid  # one process throughout: the engine recovered itself
    assert "Traceback" not in log, log
    skipped = MARKERS_SKIPPED in kafka.server_log.read_text(errors="replace")
    _check_exactly_once(
        bootstrap, unique_name, source, output, records, placed, markers_kept=not skipped
    )


def test_an_instance_stopped_past_its_session_is_fenced_and_rejoins(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = DemoStream(seed=SEED, keys=500, toast_size=100).records(20_000)
    args = [
        run_args(
            bootstrap,
            unique_name,
            [source],
            tmp_path / f"state-{i}",
            "--workers",
            "1",
            *FAST_GROUP,
            output_topic=output,
        )
        for i in range(2)
    ]
    with (
        HydratorProcess(args[0], tmp_path / "a.log") as a,
        HydratorProcess(args[1], tmp_path / "b.log", start=False) as b,
    ):
        a.wait_for_log(ALL, timeout_s=60)
        b.start()
        b.wait_for_log(r"assigned partitions \[\d", timeout_s=60)
        producing = BackgroundProducer(bootstrap, source, _tuples(records), seconds=30)
        producing.start()
        time.sleep(5)
        a.process.send_signal(signal.SIGSTOP)  # mid-batch: its transaction is open
        try:
            b.wait_for_log(ALL, timeout_s=60)  # the group gave b everything
            time.sleep(5)  # b hydrates a's partitions meanwhile
        finally:
            resumed_at = len(a.log)
            a.process.send_signal(signal.SIGCONT)
        # a learns it is out of the group, drops its batch and joins again
        a.wait_for_log(r"assigned partitions \[\d", timeout_s=90, since=resumed_at)
        placed = producing.join()
        wait_until_committed(bootstrap, unique_name, source, [a, b], timeout_s=240)
        assert a.terminate(timeout_s=60) == 0, a.log
        assert b.terminate(timeout_s=60) == 0, b.log
        logs = a.log + b.log

    assert "Traceback" not in logs, logs
    print(f"stopped instance after resuming: {_after_resume(a.log[resumed_at:])}")
    _check_exactly_once(bootstrap, unique_name, source, output, records, placed)


def test_a_transaction_the_broker_aborts_is_redone(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    records = DemoStream(seed=SEED, keys=300, toast_size=100).records(6_000)
    placed = produce(bootstrap, source, _tuples(records))
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--workers",
        "1",
        "--available-now",
        # batches of about half a second, well within the transaction timeout but the one that
        # stalls
        "--backlog-commit-interval",
        "500ms",
        "-X",
        "producer.transaction.timeout.ms=3000",
        output_topic=output,
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.harness.faulty_engine", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, STALL_COMMIT_S: "8"},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert "faulty_engine: stalling the commit" in done.stderr
    # the broker aborted the stalled transaction: the commit failed, the engine started again
    assert "restarting the engine" in done.stderr, done.stderr[-5000:]
    assert "Traceback" not in done.stderr, done.stderr
    _check_exactly_once(bootstrap, unique_name, source, output, records, placed)


def _check_exactly_once(
    bootstrap: str,
    application_id: str,
    source: str,
    output: str,
    records: list[ChangeRecord],
    placed: list[tuple[int, int]],
    markers_kept: bool = True,
) -> None:
    """Every input hydrated correctly, in per-key order, none lost; exactly once where the
    broker wrote its transaction markers (else repeats only as identical copies)."""
    outputs = read_topic(bootstrap, output, timeout_s=60)
    truth, copies = copies_by_source(outputs, records, placed, source)
    for src, outs in copies.items():
        check_hydrated(src, outs[0], truth[src])
    check_key_order(copies)
    kind = APACHE_KAFKA if markers_kept else TANSU  # TANSU: repeats tolerated as copies
    repeated = app_repeats(Broker(bootstrap, kind), application_id, [output])
    if not markers_kept:
        print(f"the broker skipped transaction markers at its restart: {repeated} repeats")


def _after_resume(log: str) -> str:
    """What the resumed instance said first: its failed commit or its lost partitions."""
    for line in log.splitlines():
        if "partitions lost" in line or "failed" in line or "fenced" in line:
            return line.strip()
    return "(nothing: it rejoined without a failure)"


def _tuples(records: list[ChangeRecord]) -> list[tuple[bytes | None, bytes | None, Headers]]:
    return [(r.key, r.value, list(r.headers)) for r in records]
