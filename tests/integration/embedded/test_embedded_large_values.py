"""Wide rows through the embedded engine: a ~1 KB row and an 8 KB TOASTed column `doc` that most
events leave unchanged (the benchmark's workload, bench/workload.py).

When the updates ship `doc` as the placeholder, the state changelog grows by about what each
event changed (the row), not by the row with its 8 KB value (kept apart from the row, written
once, compressed: state/large.py). When the events arrive while the engine is SIGKILLed at
random moments and restarted, once without its local stores (restored from the changelog
alone), a read_committed reader still finds every event hydrated correctly, doc and whole
`before` alike.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.workload import PLACEHOLDER, Checker, Workload, WorkloadShape
from tests.harness.exactly_once import app_repeats
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import BackgroundProducer, create_topic, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 2
KEYS = 300
UPDATES = 1_200
KILLS = 3
SEED = 20250101
# The goal: state bytes written per event at most 1.2x the bytes the event changed.
GOAL = 1.2


def test_an_update_that_leaves_the_large_value_unchanged_writes_about_what_it_changed(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, record_property: Any
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.customers", f"{unique_name}.out"
    changelog = f"{unique_name}-state"
    create_topic(bootstrap, source, PARTITIONS)
    workload = Workload(WorkloadShape(KEYS + UPDATES, KEYS, placeholder_ratio=1.0, seed=SEED))
    events = list(workload.events())
    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--available-now", output_topic=output
    )

    def run(part: list[tuple[int, bytes, bytes]]) -> int:
        """Hydrate `part`; the bytes (keys and values) the changelog holds afterwards."""
        produce(bootstrap, source, [(key, value, []) for _, key, value in part])
        done = run_to_completion(args, timeout_s=300)
        assert done.returncode == 0, done.stderr
        records = read_topic(bootstrap, changelog, isolation="read_uncommitted")
        return sum(len(r.key or b"") + len(r.value or b"") for r in records)

    inserts, updates = events[:KEYS], events[KEYS:]
    after_inserts = run(inserts)
    after_updates = run(updates)
    insert_ratio = after_inserts / sum(_changed_bytes(value) for _, _, value in inserts)
    changed = sum(_changed_bytes(value) for _, _, value in updates)
    ratio = (after_updates - after_inserts) / changed
    summary = (
        f"{KEYS} inserts of a ~1 KB row with an 8 KB doc: changelog "
        f"{after_inserts / KEYS:.0f} B/event ({insert_ratio:.2f}x what they wrote); "
        f"{UPDATES} updates leaving doc unchanged: "
        f"{(after_updates - after_inserts) / UPDATES:.0f} B/event for "
        f"{changed / UPDATES:.0f} B/event changed ({ratio:.2f}x, goal <= {GOAL}x)"
    )
    print(summary)
    record_property("large_values_bytes", summary)
    assert ratio <= GOAL, summary
    checker = Checker(workload)
    for record in read_topic(bootstrap, output, timeout_s=120):
        checker.check(record.value)
    assert checker.finish().summary() == "ok", checker.verdict.examples


def test_wide_rows_survive_sigkill_and_a_restore_from_the_changelog_alone(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A fifth of the updates give doc a new value (a new large value written, the old one
    collected) while the engine is killed at random moments, once losing its local stores."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.customers", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    workload = Workload(WorkloadShape(KEYS + 2 * UPDATES, KEYS, placeholder_ratio=0.8, seed=SEED))
    events = list(workload.events())
    state_dir = tmp_path / "state"
    # restart latency only (see test_embedded_crash.py)
    extra = ["-X", "consumer.session.timeout.ms=1000", "-X", "consumer.heartbeat.interval.ms=250"]
    args = run_args(bootstrap, unique_name, [source], state_dir, *extra, output_topic=output)
    producing = BackgroundProducer(
        bootstrap, source, [(key, value, []) for _, key, value in events], seconds=20, chunks=40
    )
    producing.start()
    rng = random.Random(SEED)
    wipe_at = rng.randrange(1, KILLS)
    for i in range(KILLS):
        with HydratorProcess(args, tmp_path / f"run-{i}.log") as process:
            process.wait_until_held({0, 1}, timeout_s=120)  # by its workers together
            time.sleep(rng.uniform(0.5, 3.0))
            assert process.process.poll() is None, process.log
            process.kill()
        if i == wipe_at:
            for store in (state_dir / unique_name).glob(f"{unique_name}-state-*"):
                shutil.rmtree(store)
    producing.join()
    done = run_to_completion([*args, "--available-now"], timeout_s=300)
    assert done.returncode == 0, done.stderr

    checker = Checker(workload)
    for record in read_topic(bootstrap, output, timeout_s=120):
        checker.check(record.value)
    verdict = checker.finish()
    assert not verdict.summary().startswith("WRONG"), (verdict.summary(), verdict.examples)
    app_repeats(kafka_broker, unique_name, [output])


def _changed_bytes(value: bytes) -> int:
    """What an event changed: its row as shipped, less the columns it left unchanged (shipped as
    the placeholder)."""
    after = orjson.loads(value)["after"]
    return len(orjson.dumps({c: v for c, v in after.items() if v != PLACEHOLDER}))
