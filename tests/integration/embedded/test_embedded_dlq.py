"""Bad input goes to the dead-letter topic with its reason; the good events around it arrive."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from tests.harness.cdc_events import ToastTable, after_of, key_bytes
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.replays import check_replayed
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration

BAD = [
    (key_bytes(1), b"this is not json", "not JSON"),
    (key_bytes(2), orjson.dumps({"hello": "world"}), "no format takes this value"),
    (key_bytes(3), orjson.dumps({"before": None, "after": {"id": 3}, "op": "x"}), "unknown op"),
    (b"\xff\x00not a key", orjson.dumps({"before": None, "after": None, "op": "c"}), "key"),
    (key_bytes(4), orjson.dumps({"before": None, "after": None, "op": "u"}), "'after'"),
]


def test_bad_records_go_to_the_dlq(kafka_broker: Broker, unique_name: str, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 2)
    table = ToastTable()
    good = list(table.workload(keys=6, updates_per_key=3))
    # Every bad record sits between good ones, of the same keys where it has a good key.
    records, bad_values = [], {}
    bad = iter(BAD)
    for i, record in enumerate(good):
        records.append(record)
        if i % 4 == 3 and (item := next(bad, None)) is not None:
            key, value, reason = item
            bad_values[value] = (key, reason)
            records.append((key, value, [("trace", b"kept")]))
    assert len(bad_values) == len(BAD)
    placed = produce(bootstrap, source, records)

    args = run_args(
        bootstrap, unique_name, [source], tmp_path / "state", "--available-now", output_topic=output
    )
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr

    dead = read_topic(bootstrap, f"{unique_name}-dlq")
    assert sorted(d.value for d in dead) == sorted(bad_values)
    sources = {
        f"{source}:{p}:{o}"
        for (_, v, _), (p, o) in zip(records, placed, strict=True)
        if v in bad_values
    }
    for record in dead:
        key, reason = bad_values[record.value]
        assert record.key == key  # the original bytes, untouched
        assert reason in record.header(HEADER_ERROR).decode()
        assert record.header("trace") == b"kept"
        assert record.header(HEADER_SOURCE).decode() in sources

    outputs = read_topic(bootstrap, output)
    assert len(outputs) == len(good)
    for out in outputs:
        lsn, after = after_of(out.value)
        assert after == table.expected_after[lsn]


def test_a_replayed_dead_letter_leaves_with_one_source(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """A dead letter replayed into the input, once fixed and once as it was: the output and the
    new dead letter carry one hydrator.source (this run's) and the old one as
    hydrator.source.original, never two hydrator.source headers with the stale one first."""
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 2)
    table = ToastTable()
    fixed = table.insert(7)
    broken = (fixed[0], b"this is not json", [("trace", b"kept")])
    produce(bootstrap, source, [broken, broken])
    # every record of the first run is a dead letter, on purpose: no ratio check
    extra = ("--available-now", "--max-dlq-ratio", "0")
    state = tmp_path / "state"
    args = run_args(bootstrap, unique_name, [source], state, *extra, output_topic=output)
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr
    first, second = read_topic(bootstrap, f"{unique_name}-dlq")

    # the operator fixes the first and replays both, headers and all
    replayed = [(first.key, fixed[1], first.headers), (second.key, second.value, second.headers)]
    (good_at, bad_at) = produce(bootstrap, source, replayed)
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr

    (out,) = read_topic(bootstrap, output)
    check_replayed(out, f"{source}:{good_at[0]}:{good_at[1]}", first.header(HEADER_SOURCE), False)
    assert out.header("trace") == b"kept"
    assert after_of(out.value)[1] == table.rows[7]
    dead = read_topic(bootstrap, f"{unique_name}-dlq")[2:]
    (again,) = dead
    check_replayed(again, f"{source}:{bad_at[0]}:{bad_at[1]}", second.header(HEADER_SOURCE), True)
