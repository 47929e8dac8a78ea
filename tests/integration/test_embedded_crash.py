"""SIGKILL the engine at random moments of a 50k-event stream, restart it each time: a
read_committed reader of the output sees every input record hydrated correctly, none lost.

The stream arrives while the engine is being killed (a producer thread paces it), so most kills
land in an open transaction; some land during start-up or restore, and now and then the local
stores are wiped so the restart rebuilds them from the changelog alone.

Duplicates: on Apache Kafka a dead producer's transaction is aborted and hidden, so there are
none. On Tansu its records stay visible (docs/guarantees.md), so a kill can leave outputs of the
batch it was writing, and the restarted engine, which resumes from the last committed offsets,
writes them again. Every duplicate must be exactly that: a repeated `hydrator.source` with identical
bytes, the first copy written by an incarnation that was killed, the second after its kill.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hydrator.demo.stream import ChangeRecord, DemoStream
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.stream_checks import check_hydrated, copies_by_source
from tests.harness.topics import (
    BackgroundProducer,
    Consumed,
    Headers,
    create_topic,
    end_offsets,
    read_topic,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
EVENTS = 50_000
KILLS = 12
PRODUCE_SECONDS = 30.0
SEED = 20240611
ASSIGNED = r"assigned partitions \[0, 1, 2, 3\]"


def test_sigkill_at_random_moments_loses_nothing(
    kafka_broker: Broker,
    unique_name: str,
    tmp_path: Path,
    record_property: Any,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    rng = random.Random(SEED)
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    stream = DemoStream(seed=SEED, keys=2000, toast_size=100)
    records = stream.records(EVENTS)
    state_dir = tmp_path / "state"
    extra = []
    if kafka_broker.kind == "tansu":
        # Only the restart latency: a killed member leaves the group when its session times
        # out, and the next incarnation's join waits for that (Apache Kafka rejects < 6 s).
        extra = [
            "-X",
            "consumer.session.timeout.ms=1000",
            "-X",
            "consumer.heartbeat.interval.ms=250",
        ]
    # One process (--workers 1): each kill ends the whole engine at a moment the test picks, and
    # each incarnation's outputs are told apart by where it began writing. A worker killed
    # under a supervisor is tests/integration/test_embedded_workers.py's.
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--workers", "1", *extra, output_topic=output
    )

    producing = BackgroundProducer(bootstrap, source, _tuples(records), PRODUCE_SECONDS, chunks=100)
    producing.start()
    # Offsets of the output topic where each incarnation began writing.
    starts: list[dict[int, int]] = []
    kills: list[str] = []
    wiped = 0
    for i in range(KILLS):
        # (Before the first run the topic does not exist yet, and asking Tansu about a topic
        # creates it.)
        starts.append(end_offsets(bootstrap, output) if i else {})
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
        # Requests the dead process had already sent may still land (a big batch can take the
        # broker a while); the next snapshot of the output's end must come after them.
        _wait_until_quiet(bootstrap, [output, f"{unique_name}-state"])
        if rng.random() < 0.25:
            # The process id stays: the restart fences the dead transaction, then rebuilds
            # every store from the changelog alone.
            wiped += 1
            for store in (state_dir / unique_name).glob(f"{unique_name}-state-*"):
                shutil.rmtree(store)
    placed = producing.join()
    starts.append(end_offsets(bootstrap, output))
    done = run_to_completion([*args, "--available-now"], timeout_s=120)
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output, timeout_s=60)
    truth, copies = copies_by_source(outputs, records, placed, source)
    for src, outs in copies.items():
        check_hydrated(src, outs[0], truth[src])
    duplicates = _check_duplicates(copies, starts)
    _check_order(copies)

    summary = (
        f"crash test: {len(records)} events, {KILLS} SIGKILLs ({'; '.join(kills)}), "
        f"{wiped} restarts without local stores, {len(outputs)} outputs read_committed, "
        f"{sum(duplicates.values())} duplicates, all re-emissions of records a killed "
        f"incarnation had written (dead transactions): per incarnation {dict(duplicates)}; "
        f"broker {kafka_broker.kind}"
    )
    print(summary)
    record_property("crash_summary", summary)
    if kafka_broker.hides_dead_producer_records:
        assert sum(duplicates.values()) == 0, "exactly once on a broker that hides aborts"


def _wait_until_quiet(bootstrap: str, topics: list[str], timeout_s: float = 30) -> None:
    """Until the ends of `topics` stop moving for a second (topics that do not exist yet are
    left alone: asking Tansu about a topic creates it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    last: dict[str, dict[int, int]] | None = None
    while time.monotonic() < deadline:
        try:
            existing = admin.list_topics(timeout=10).topics
        except KafkaException:  # a metadata request timed out on a loaded machine: ask again
            continue
        ends = {topic: end_offsets(bootstrap, topic) for topic in topics if topic in existing}
        if ends == last:
            return
        last = ends
        time.sleep(1.0)
    raise TimeoutError(f"{topics} still growing after the kill")


def _check_duplicates(
    copies: dict[str, list[Consumed]], starts: list[dict[int, int]]
) -> Counter[int]:
    """Every repeated source has identical copies, the first written by an incarnation that was
    killed and the later ones after that kill; returns duplicates per killed incarnation."""
    per_incarnation: Counter[int] = Counter()
    for src, outs in copies.items():
        if len(outs) == 1:
            continue
        first, *again = outs
        for other in again:
            assert (other.partition, other.key, other.value, other.headers) == (
                first.partition,
                first.key,
                first.value,
                first.headers,
            ), f"{src} re-emitted differently"
        writer = _incarnation(first, starts)
        assert writer is not None, f"{src}: first copy at {first.offset} after the last kill"
        for other in again:
            assert other.offset >= starts[writer + 1].get(other.partition, 0), (
                f"{src}: copies at {first.offset} and {other.offset} were both written by "
                f"incarnation {writer} (a duplicate without a crash)"
            )
        per_incarnation[writer] += len(again)
    return per_incarnation


def _incarnation(out: Consumed, starts: list[dict[int, int]]) -> int | None:
    """Which killed incarnation wrote the output at this offset (None: the final run)."""
    for i in range(len(starts) - 1):
        if starts[i].get(out.partition, 0) <= out.offset < starts[i + 1].get(out.partition, 0):
            return i
    return None


def _check_order(copies: dict[str, list[Consumed]]) -> None:
    """Each key's outputs (first copies) come in the order of their input records."""
    by_key: dict[tuple[int, bytes | None], list[tuple[int, int]]] = defaultdict(list)
    for src, outs in copies.items():
        first = outs[0]
        input_offset = int(src.rsplit(":", 1)[1])
        by_key[(first.partition, first.key)].append((first.offset, input_offset))
    for key, pairs in by_key.items():
        in_output_order = [offset for _, offset in sorted(pairs)]
        assert in_output_order == sorted(in_output_order), f"{key} out of order"


def _tuples(records: list[ChangeRecord]) -> list[tuple[bytes | None, bytes | None, Headers]]:
    return [(r.key, r.value, list(r.headers)) for r in records]
