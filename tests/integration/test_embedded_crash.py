"""SIGKILL the engine mid-stream, restart it: nothing is lost, and the only duplicates are
whole re-emissions of the same input record (same `hydrator.source`, same bytes).

On Apache Kafka a dead producer's transaction is aborted, so there are no duplicates at all. On
Tansu its records stay visible (DESIGN §7): a crash can leave the outputs of the batch it was
writing, and the restarted engine may emit them again.
"""

from __future__ import annotations

import shutil
import time
from collections import defaultdict
from pathlib import Path

import pytest

from hydrator.core.records import HEADER_SOURCE
from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, end_offsets, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.mark.parametrize("keep_store", [True, False], ids=["local-store", "changelog-only"])
def test_sigkill_and_restart_loses_nothing(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, keep_store: bool
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=2500)
    records = list(table.workload(keys=300, updates_per_key=50))
    placed = produce(bootstrap, source, records)
    state_dir = tmp_path / "state"
    args = run_args(bootstrap, unique_name, [source], state_dir, output_topic=output)

    with HydratorProcess(args, tmp_path / "first.log") as first:
        _wait_for_outputs(bootstrap, output, at_least=len(records) // 4, process=first)
        first.kill()
    if not keep_store:
        # The process id stays: the restart fences the dead transaction, then rebuilds every
        # store from the changelog alone.
        for store in (state_dir / unique_name).glob(f"{unique_name}-state-*"):
            shutil.rmtree(store)

    done = run_to_completion([*args, "--available-now"])
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output)
    first_by_source: dict[str, bytes | None] = {}
    duplicates = 0
    for out in outputs:
        src = out.header(HEADER_SOURCE).decode()
        if src in first_by_source:
            duplicates += 1
            assert out.value == first_by_source[src], f"{src} re-emitted differently"
        else:
            first_by_source[src] = out.value
    expected_sources = {f"{source}:{p}:{o}" for p, o in placed}
    missing = sorted(expected_sources - set(first_by_source))
    assert not missing, f"lost {len(missing)} records: {missing[:5]}...{missing[-5:]}"

    lsns_by_key: dict[bytes | None, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], f"lsn {lsn} wrongly hydrated"
        src = out.header(HEADER_SOURCE).decode()
        if src not in seen:
            seen.add(src)
            lsns_by_key[out.key].append(lsn)
    for key, lsns in lsns_by_key.items():
        assert lsns == sorted(lsns), f"{key!r} out of order"

    print(f"outputs {len(outputs)}, inputs {len(records)}, duplicates {duplicates}")
    if kafka_broker.hides_dead_producer_records:
        assert duplicates == 0


def _wait_for_outputs(
    bootstrap: str, topic: str, at_least: int, process: HydratorProcess, timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(end_offsets(bootstrap, topic).values()) >= at_least:
            return
        assert process.process.poll() is None, process.log
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} outputs after {timeout_s}s:\n{process.log}")
