"""Restore takes only committed state from the changelog.

A broker that honours transactions hides a dead transaction's changelog records; Tansu shows
them (docs/testing.md). Here a transaction that writes wrong states "ahead" of the committed offsets
into the changelog and never commits stands in for an instance killed in the middle of its
commit. Neither a restart that replays the changelog's tail nor one that rebuilds every store
from the beginning may bring those states back.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

from hydrator.engines.embedded.changelog import HEADER
from hydrator.formats.keys import canonical_key
from state.codec import encode_state
from state.record import StateRecord, state_key
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

KEYS = 10


def test_a_dead_transactions_changelog_is_not_restored(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    table = ToastTable(doc_size=200)
    state_dir = tmp_path / "state"
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--available-now", output_topic=output
    )

    def run(records: list) -> None:
        produce(bootstrap, source, records)
        done = run_to_completion(args)
        assert done.returncode == 0, done.stderr

    run([table.insert(key) for key in range(KEYS)])
    _dead_transaction(bootstrap, unique_name, source, committed_offset=KEYS)

    # the local store is kept: the dead records are in the tail the restore replays
    run([table.update(key) for key in range(KEYS)])
    # no local store: everything is replayed, the dead records and then their repairs
    for store in (state_dir / unique_name).glob(f"{unique_name}-state-*"):
        shutil.rmtree(store)
    run([table.update(key) for key in range(KEYS)])

    outputs = read_topic(bootstrap, output)
    assert len(outputs) == 3 * KEYS
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn], f"lsn {lsn}: {str(after)[:80]}"


def _dead_transaction(
    bootstrap: str, application_id: str, source: str, committed_offset: int
) -> None:
    """Wrong states for every key, as if a batch past the committed input offset had written
    them, in a transaction that is aborted (Tansu keeps its records visible)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dead-instance"})
    producer.init_transactions(30)
    producer.begin_transaction()
    wrong = StateRecord(image={"id": 0, "doc": "WRONG", "n": 99}, pos=(10**9,))
    tag = orjson.dumps({source: committed_offset + 5})
    for key in range(KEYS):
        producer.produce(
            f"{application_id}-state",
            encode_state(wrong),
            state_key(source, canonical_key(key_bytes(key))),
            partition=0,
            headers=[(HEADER, tag)],
        )
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
