"""Damaged state does not crash-loop the engine.

* A local store whose files are damaged between two runs is moved aside (kept for inspection,
  named in a warning) and rebuilt from the changelog; the outputs stay correct.
* A changelog record that cannot be decoded is skipped and reported (offset, reason), its key's
  state forgotten: that key's next placeholder stays unresolved instead of being filled from a
  wrong state, and every other key is hydrated as before.
* A restore that cannot finish does not hold a stop request back.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from hydrator.formats.keys import canonical_key
from state.record import state_key
from tests.harness.cdc_events import PLACEHOLDER, ToastTable, after_of, key_bytes
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

KEYS = 20


def _stores(state_dir: Path, application_id: str) -> list[Path]:
    return sorted((state_dir / application_id).glob(f"{application_id}-state-*"))


def test_a_damaged_store_is_moved_aside_and_rebuilt(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 2)
    table = ToastTable(doc_size=300)
    state_dir = tmp_path / "state"
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--available-now", output_topic=output
    )

    produce(bootstrap, source, [table.insert(key) for key in range(KEYS)])
    first = run_to_completion(args)
    assert first.returncode == 0, first.stderr

    stores = [s for s in _stores(state_dir, unique_name) if not s.name.count(".damaged")]
    assert len(stores) == 2
    for store in stores:  # every file of the store garbled, as a disk fault might leave it
        for file in store.iterdir():
            if file.name != "LOCK":
                file.write_bytes(b"\xff" * 64)

    produce(bootstrap, source, [table.update(key) for key in range(KEYS)])
    second = run_to_completion(args)
    assert second.returncode == 0, second.stderr
    for store in stores:
        assert re.search(rf"{re.escape(store.name)}: the local store is damaged", second.stderr), (
            second.stderr
        )
    aside = [s for s in _stores(state_dir, unique_name) if ".damaged-" in s.name]
    assert len(aside) == 2, "the damaged stores are kept for inspection"
    assert "Traceback" not in second.stderr

    outputs = read_topic(bootstrap, output)
    assert len(outputs) == 2 * KEYS
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], f"lsn {lsn}: {str(after)[:80]}"


def test_an_undecodable_changelog_record_is_skipped_and_reported(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    table = ToastTable(doc_size=300)
    state_dir = tmp_path / "state"
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--available-now", output_topic=output
    )

    produce(bootstrap, source, [table.insert(key) for key in range(KEYS)])
    first = run_to_completion(args)
    assert first.returncode == 0, first.stderr

    # Garbage for key 3 (and a record with an unreadable header for key 4), as a faulty
    # writer or a disk fault on the broker might leave them.
    damaged = 3
    changelog = f"{unique_name}-state"
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(
        changelog, b"\x07garbage", state_key(source, canonical_key(key_bytes(damaged))), partition=0
    )
    producer.produce(
        changelog,
        b"\x07garbage",
        state_key(source, canonical_key(key_bytes(4))),
        partition=0,
        headers=[("hydrator.offsets", b"{not json")],
    )
    assert producer.flush(30) == 0
    # Without the local store every record is replayed, the garbage included.
    for store in _stores(state_dir, unique_name):
        for file in store.iterdir():
            file.unlink()
        store.rmdir()

    produce(bootstrap, source, [table.update(key) for key in range(KEYS)])
    second = run_to_completion(args)
    assert second.returncode == 0, second.stderr
    skipped = re.findall(r"skipped the changelog record at offset (\d+): (.*)", second.stderr)
    assert len(skipped) == 2, second.stderr
    assert "undecodable state" in skipped[0][1]
    assert "unreadable hydrator.offsets header" in skipped[1][1]

    outputs = read_topic(bootstrap, output)
    assert len(outputs) == 2 * KEYS
    for out in outputs[KEYS:]:
        lsn, after = after_of(out.value)
        assert after is not None
        if after["id"] in (damaged, 4):
            # Its state was forgotten: the placeholder stays, nothing is made up.
            assert after["doc"] == PLACEHOLDER, f"key {after['id']} filled from a bad record"
        else:
            assert after == table.expected_after[lsn], f"lsn {lsn}: {str(after)[:80]}"


def test_a_stop_request_ends_a_restore_that_cannot_finish(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """An open transaction on the changelog holds a read_committed restore back (for ever on
    Tansu, until the transaction times out on Kafka): one SIGTERM must still end the run."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    table = ToastTable(doc_size=300)
    state_dir = tmp_path / "state"
    args = run_args(bootstrap, unique_name, [source], state_dir, output_topic=output)

    produce(bootstrap, source, [table.insert(key) for key in range(KEYS)])
    first = run_to_completion([*args, "--available-now"])
    assert first.returncode == 0, first.stderr
    for store in _stores(state_dir, unique_name):
        for file in store.iterdir():
            file.unlink()
        store.rmdir()

    blocker = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"{unique_name}-blocker",
            "transaction.timeout.ms": 600_000,
        }
    )
    blocker.init_transactions(30)
    blocker.begin_transaction()
    blocker.produce(f"{unique_name}-state", b"x", b"blocker", partition=0)
    assert blocker.flush(30) == 0
    try:
        with HydratorProcess(args, tmp_path / "run.log") as process:
            process.wait_for_log(r"restore waits at offset \d+", timeout_s=60)
            began = time.monotonic()
            code = process.terminate(timeout_s=30)
            took = time.monotonic() - began
    finally:
        blocker.abort_transaction(30)
    assert code == 0, process.log
    assert took < 10, process.log
    assert "stopped during restore" in process.log
