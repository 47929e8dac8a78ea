"""A chain of primary-key changes waiting in a backlog, hydrated with long batches.

Each CREATE of the chain waits for the handoff of the DELETE before it, and that DELETE sits
behind the previous CREATE of the chain.

* Embedded: through the handoff topic every hop took one commit interval, so after an outage a
  chain longer than `--handoff-timeout` / `--commit-interval` hops came out unresolved at its
  end. Within one process every hop is applied in the batch that made it.
* Spark `--available-now`: each hop takes one run (the handoff is read by the next), so a chain
  whose runs outlast `--handoff-timeout` (a machine under load; here a 1 s timeout) had its last
  CREATEs released unresolved while their handoffs were on the way. While a run sends handoffs,
  the next fires no timeout (docs/guarantees.md).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.harness.cdc_events import ToastTable, after_of
from tests.harness.hydrator_process import HydratorProcess, run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4


def _chain(bootstrap: str, source: str, hops: int) -> tuple[ToastTable, int]:
    """The chain's records in `source`; the table that knows each CREATE's full row, and how
    many records there are."""
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=500)
    _, records = table.key_change_chain(hops + 1, PARTITIONS)
    produce(bootstrap, source, records)
    return table, len(records)


def _check_every_create_filled(
    bootstrap: str, output: str, table: ToastTable, hops: int, log: str
) -> None:
    outputs = read_topic(bootstrap, output)
    creates = [
        out
        for out in outputs
        if out.value and orjson.loads(out.value)["op"] == "c" and after_of(out.value)[0] > 1
    ]
    assert len(creates) == hops, [out.value for out in outputs]
    for out in creates:
        lsn, after = after_of(out.value)
        assert out.header("hydrator.unresolved") is None, log
        assert after == table.expected_after[lsn], log


def test_a_chain_of_key_changes_in_a_backlog_is_filled_with_long_batches(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    table, records = _chain(bootstrap, source, hops=8)

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
        process.wait_for_log(rf"parked 0, dead letters 0, records {records}, commits [1-9]")
        assert process.terminate() == 0, process.log
    _check_every_create_filled(bootstrap, output, table, 8, process.log)


def test_a_chain_outlasting_the_handoff_timeout_is_filled_by_spark_available_now(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    from tests.integration.spark.test_spark_engine import SPARK_TIMEOUT_S, spark_args

    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    table, _ = _chain(bootstrap, source, hops=4)
    args = spark_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--available-now",
        "--handoff-timeout", "1s",
    )  # fmt: skip
    done = run_to_completion(args, timeout_s=SPARK_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "handoff timeouts" not in done.stderr, done.stderr[-3000:]
    _check_every_create_filled(bootstrap, f"{source}.hydrated", table, 4, done.stderr[-3000:])
