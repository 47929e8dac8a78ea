"""A chain of primary-key changes in a backlog, through the Spark engine's `--available-now`.

Each CREATE of the chain waits for the handoff of the DELETE before it, and that DELETE sits
behind the previous CREATE. On Spark each hop takes one available-now run (the handoff is read
by the next), so a chain whose runs outlast `--handoff-timeout` (a machine under load; here a
1 s timeout) had its last CREATEs released unresolved while their handoffs were on the way.
While a run sends handoffs, the next fires no timeout (docs/guarantees.md).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic
from tests.integration.test_spark_engine import SPARK_TIMEOUT_S, spark_args

pytestmark = pytest.mark.integration

PARTITIONS = 2
HOPS = 4


def test_a_chain_of_key_changes_outlasting_the_handoff_timeout_is_filled(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=500)
    _, records = table.key_change_chain(HOPS + 1, PARTITIONS)
    produce(bootstrap, source, records)

    args = spark_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--available-now",
        "--handoff-timeout",
        "1s",
    )
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "handoff timeouts" not in done.stderr, done.stderr[-3000:]

    outputs = read_topic(bootstrap, f"{source}.hydrated")
    creates = [
        out
        for out in outputs
        if out.value and orjson.loads(out.value)["op"] == "c" and after_of(out.value)[0] > 1
    ]
    assert len(creates) == HOPS, [out.value for out in outputs]
    for out in creates:
        lsn, after = after_of(out.value)
        assert out.header("hydrator.unresolved") is None, done.stderr[-3000:]
        assert after == table.expected_after[lsn]
