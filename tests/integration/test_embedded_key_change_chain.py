"""A chain of primary-key changes waiting in a backlog, hydrated with long batches.

Each CREATE of the chain waits for the handoff of the DELETE before it, and that DELETE sits
behind the previous CREATE of the chain. Through the handoff topic every hop took one commit
interval, so after an outage a chain longer than `--handoff-timeout` / `--commit-interval` hops
came out unresolved at its end. Within one process every hop is applied in the batch that made it.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import HydratorProcess, run_args
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4
HOPS = 8


def test_a_chain_of_key_changes_in_a_backlog_is_filled_with_long_batches(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=500)
    _, records = table.key_change_chain(HOPS + 1, PARTITIONS)
    produce(bootstrap, source, records)

    # Eight hops through the handoff topic would take eight 3 s batches, far past the 5 s
    # timeout; one process owns every partition, so none has to.
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--workers",
        "1",
        "--commit-interval",
        "3s",
        "--handoff-timeout",
        "5s",
        output_topic=output,
    )
    with HydratorProcess(args, tmp_path / "run.log") as process:
        process.wait_for_log(rf"parked 0, dead letters 0, records {len(records)}, commits [1-9]")
        assert process.terminate() == 0, process.log

    outputs = read_topic(bootstrap, output)
    creates = [
        out
        for out in outputs
        if out.value and orjson.loads(out.value)["op"] == "c" and after_of(out.value)[0] > 1
    ]
    assert len(creates) == HOPS, [out.value for out in outputs]
    for out in creates:
        lsn, after = after_of(out.value)
        assert out.header("hydrator.unresolved") is None, process.log
        assert after == table.expected_after[lsn], process.log
