"""Restore takes only committed state from the changelog.

A broker that honours transactions hides a dead transaction's changelog records; Tansu shows
them (docs/guarantees.md). Here a transaction that writes wrong states "ahead" of the committed
offsets into the changelog and never commits stands in for an instance killed in the middle of
its commit. Neither a restart that replays the changelog's tail nor one that rebuilds every store
from the beginning may bring those states back.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

from hydrator.engines.embedded.changelog import HEADER
from hydrator.formats.keys import canonical_key
from hydrator.kafka.partitioner import partition_for_key
from state.codec import encode_state
from state.record import StateRecord, state_key
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.exactly_once import app_repeats
from tests.harness.faulty_engine import DIE_WITH_STATE_KEYS, EXIT_CODE
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

KEYS = 10
PARTITIONS = 4


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
    app_repeats(kafka_broker, unique_name, [output])
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


def test_a_dead_transaction_is_undone_in_every_task_its_handoffs_reached(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A row's key changed twice, a → b → c, each key in another partition. Both CREATEs wait
    parked, b's with b's DELETE behind it, until a's DELETE comes. The batch that reads it
    releases the whole chain within one process: task b's and task c's state change although
    partition b gave no input. That batch dies mid-commit. Every task must restore the state
    from before it, so that the DELETE of a, read again, replays the chain; were c's parked
    CREATE undone but b's release kept, c's handoff would never be sent again, and c's CREATE
    would come out unresolved after the handoff timeout."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    a, b, c, other = _keys_in_partitions(3, 0, 1, 1)
    table = ToastTable(doc_size=300)
    inserted = table.insert(a)
    a_to_b, b_to_c = table.change_key(a, b), table.change_key(b, c)
    state_dir = tmp_path / "state"
    args = run_args(
        bootstrap, unique_name, [source], state_dir, "--workers", "1", output_topic=output
    )

    # Everything but a's DELETE: b and c park, and that is committed.
    parked = [inserted, a_to_b[2], *b_to_c]
    produce(bootstrap, source, parked)
    with HydratorProcess(args, tmp_path / "parked.log") as process:
        process.wait_for_log(rf"parked 2, dead letters 0, records {len(parked)}, commits [1-9]")
        assert process.terminate() == 0, process.log

    # a's DELETE, and a record of c's partition in the same batch: the dying batch moves the
    # inputs of a's and c's partitions, none of b's.
    produce(bootstrap, source, [*a_to_b[:2], table.insert(other)])
    dying = subprocess.run(
        [sys.executable, "-m", "tests.harness.faulty_engine", *args, "--commit-interval", "5s"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, DIE_WITH_STATE_KEYS: _state_key_hex(source, b, c, other)},
    )
    assert dying.returncode == EXIT_CODE, dying.stderr

    done = run_to_completion([*args, "--available-now", "--handoff-timeout", "5s"])
    assert done.returncode == 0, done.stderr
    outputs = read_topic(bootstrap, output)
    creates = [out for out in outputs if out.value and orjson.loads(out.value)["op"] == "c"]
    assert creates, done.stderr
    for out in creates:
        lsn, after = after_of(out.value)
        assert out.header("hydrator.unresolved") is None, f"lsn {lsn} unresolved:\n{done.stderr}"
        assert after == table.expected_after[lsn], f"lsn {lsn}: {str(after)[:80]}"
    app_repeats(kafka_broker, unique_name, [output])


def _keys_in_partitions(*partitions: int) -> list[int]:
    """A distinct key for each partition named, in order (Kafka's default partitioner)."""
    keys: list[int] = []
    for partition in partitions:
        keys.append(
            next(
                k
                for k in itertools.count(1)
                if k not in keys and partition_for_key(key_bytes(k), PARTITIONS) == partition
            )
        )
    return keys


def _state_key_hex(source: str, *keys: int) -> str:
    return ",".join(state_key(source, canonical_key(key_bytes(k))).hex() for k in keys)
