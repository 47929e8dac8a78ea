"""SIGKILL the engine at random moments of a 50k-event stream, restart it each time: a
read_committed reader of the output sees every input record hydrated correctly, exactly once,
none lost; the dead letters and handoffs likewise exactly once.

The stream arrives while the engine is being killed (a producer thread paces it), so most kills
land in an open transaction; some land during start-up or restore, and now and then the local
stores are wiped so the restart rebuilds them from the changelog alone. The test runs with
several seeds: each picks other moments.

On Apache Kafka a dead producer's transaction is aborted and hidden: no `hydrator.source` may
appear twice. On Tansu its records stay visible (docs/tansu.md): a repeat must be an identical
copy (tests/harness/exactly_once.py).
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hydrator.demo.stream import ChangeRecord, DemoStream
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.stream_checks import check_hydrated, check_key_order, copies_by_source
from tests.harness.topics import (
    BackgroundProducer,
    Headers,
    create_topic,
    read_topic,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
EVENTS = 50_000
KILLS = 12
PRODUCE_SECONDS = 30.0
SEEDS = [20240611, 7, 1311]
ASSIGNED = r"assigned partitions \[0, 1, 2, 3\]"


@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_at_random_moments_loses_nothing_and_repeats_nothing(
    kafka_broker: Broker,
    unique_name: str,
    tmp_path: Path,
    record_property: Any,
    seed: int,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    rng = random.Random(seed)
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    stream = DemoStream(seed=seed, keys=2000, toast_size=100)
    records = stream.records(EVENTS)
    state_dir = tmp_path / "state"
    # Only the restart latency: a killed member leaves the group when its session times out,
    # and the next incarnation's join waits for that (the tests' Apache Kafka allows 500 ms).
    extra = ["-X", "consumer.session.timeout.ms=1000", "-X", "consumer.heartbeat.interval.ms=250"]
    # One process (--workers 1): each kill ends the whole engine at a moment the test picks. A
    # worker killed
    # under a supervisor is tests/integration/embedded/test_embedded_workers.py's.
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--workers", "1", *extra, output_topic=output
    )

    producing = BackgroundProducer(bootstrap, source, _tuples(records), PRODUCE_SECONDS, chunks=100)
    producing.start()
    kills: list[str] = []
    wiped = 0
    for i in range(KILLS):
        # Half the incarnations commit every 100 ms even while a backlog waits, so kills also
        # land mid-commit; the others stretch their batches as a backlog lets them (up to 5 s).
        steady = ["--backlog-commit-interval", "100ms"] if rng.random() < 0.5 else []
        with HydratorProcess([*args, *steady], tmp_path / f"run-{i}.log") as process:
            if rng.random() < 0.2:
                delay, moment = rng.uniform(0.3, 2.0), "start"  # start-up, restore or join
            else:
                process.wait_for_log(ASSIGNED, timeout_s=60)
                delay, moment = rng.uniform(0.1, 2.0), "assignment"
            time.sleep(delay)
            assert process.process.poll() is None, process.log
            process.kill()
        kills.append(f"{delay:.1f}s after {moment}")
        if rng.random() < 0.25:
            # The process id stays: the restart fences the dead transaction, then rebuilds
            # every store from the changelog alone.
            wiped += 1
            for store in (state_dir / unique_name).glob(f"{unique_name}-state-*"):
                shutil.rmtree(store)
    placed = producing.join()
    done = run_to_completion([*args, "--available-now"], timeout_s=120)
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output, timeout_s=60)
    truth, copies = copies_by_source(outputs, records, placed, source)
    for src, outs in copies.items():
        check_hydrated(src, outs[0], truth[src])
    check_key_order(copies)
    repeated = app_repeats(kafka_broker, unique_name, [output])

    summary = (
        f"crash test (seed {seed}): {len(records)} events, {KILLS} SIGKILLs "
        f"({'; '.join(kills)}), {wiped} restarts without local stores, {len(outputs)} outputs "
        f"read_committed, {repeated} repeated; broker {kafka_broker.kind}"
    )
    print(summary)
    record_property("crash_summary", summary)


def _tuples(records: list[ChangeRecord]) -> list[tuple[bytes | None, bytes | None, Headers]]:
    return [(r.key, r.value, list(r.headers)) for r in records]
