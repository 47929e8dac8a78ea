"""What the re-select tests of both engines share (docs/cold-start.md, "Re-select fallback"):
the workload, the topic that begins after the rows' inserts, and the checks of every output
against the REPLICA IDENTITY FULL twin."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE
from hydrator.core.reselected import HEADER_RESELECTED, HEADER_RESELECTED_CURRENT
from tests.harness import oracle
from tests.harness.debezium import create_topics

PARTITIONS = 3
ROWS = 14
PASSWORD = "s3cret-reselect-pw"


def reselect_workload(seed: int = 27) -> oracle.Workload:
    """ROWS rows inserted with every TOAST column big, then updates of the small columns (the
    TOAST ones ship as placeholders): rows updated once (their event is the last writer), rows
    updated twice (the first event's row was written since), rows whose TOAST `body` is
    rewritten after a placeholder event, and a row updated twice in one transaction."""
    rng = random.Random(seed)
    inserts = [
        [oracle.insert_statement("insert", key, oracle.big_row(rng))] for key in range(1, ROWS + 1)
    ]

    def small(key: int) -> oracle.Statement:
        return oracle.update_statement(key, {"small": rng.randrange(1_000_000)})

    txs: list[list[oracle.Statement]] = []
    txs += [[small(k)] for k in (1, 2, 3, 4)]  # once: exact
    txs += [[small(k)] for k in (5, 6, 7, 8)]  # twice (below): the first is current
    txs += [[small(k)] for k in (9, 10)]  # then body rewritten: current, and newer
    txs.append([small(11), small(11)])  # twice in one transaction: the first cannot be exact
    txs += [[small(k)] for k in (5, 6, 7, 8)]
    txs += [[oracle.update_statement(k, {"body": oracle._text(rng, 4000)})] for k in (9, 10)]
    txs += [[small(k)] for k in (12, 13, 14)]
    return oracle.Workload([*inserts, *txs])


def late(records: list[oracle.Captured]) -> list[oracle.Captured]:
    """The records after the rows' inserts: what a topic holds once those are gone."""
    return [r for r in records if r.value is None or oracle.payload(r.value)["op"] != "c"]


def late_topic(
    bootstrap: str, capture: oracle.TwinCapture, name: str
) -> tuple[str, list[oracle.Captured]]:
    """A new topic `<the capture's default topic>.<name>` holding its `late` records: (the
    topic, the records)."""
    topic = f"{capture.default_topic}.{name}"
    records = late(capture.default)
    create_topics(bootstrap, [topic], PARTITIONS)
    produce(bootstrap, topic, records)
    return topic, records


def produce(bootstrap: str, topic: str, records: list[oracle.Captured]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for r in records:
        producer.produce(
            topic, r.value, r.key, partition=r.partition, headers=list(r.headers) or None
        )
    assert producer.flush(30) == 0


def after_placeholders(record: oracle.Captured, shapes: dict[str, Any]) -> list[str]:
    """The columns of an output's `after` that still hold the placeholder."""
    return oracle.placeholder_columns(oracle.payload(record.value)["after"], shapes)


def headers_of(record: oracle.Captured, name: str) -> list[str]:
    value = record.header(name)
    return [c for c in value.decode().split(",") if c] if value else []


def source_of(r: oracle.Captured) -> str:
    return f"{r.topic}:{r.partition}:{r.offset}"


def twin_after_by_source(capture: oracle.TwinCapture) -> dict[str, dict[str, Any]]:
    """The FULL twin's `after` for each default-identity record, paired by key and order."""
    default = defaultdict(list)
    for r in capture.default:
        if r.value is not None:
            default[oracle.canonical_key(r.key)].append(source_of(r))
    full = defaultdict(list)
    for r in capture.full:
        if r.value is not None:
            full[oracle.canonical_key(r.key)].append(oracle.payload(r.value)["after"])
    paired = {}
    for key, sources in default.items():
        assert len(sources) == len(full[key]), key
        paired.update(zip(sources, full[key], strict=True))
    return paired


@dataclass
class Checked:
    exact: int  # columns listed in hydrator.reselected, over all outputs
    current: int  # columns listed in hydrator.reselected.current
    by_key: dict[str, list[oracle.Captured]]  # outputs per canonical key, in order


def check_reselected_outputs(
    capture: oracle.TwinCapture,
    topic: str,
    records: list[oracle.Captured],
    outputs: list[oracle.Captured],
) -> Checked:
    """The outputs of `records` (the capture's `late` records in `topic`) from a run that began
    with an empty state: every placeholder of `after` filled; each re-selected column in exactly
    one of the two headers, and only columns the event shipped as placeholders; every exact
    column equal to the FULL twin's value at that event, and claimed only by the row's last
    writer."""
    assert len(outputs) == len(records)
    # the late topic's records in the order of the default topic's, to find their twins
    original = {(r.partition, r.key, r.value): source_of(r) for r in capture.default}
    late_to_original = {
        f"{topic}:{r.partition}:{i}": original[(r.partition, r.key, r.value)]
        for p in range(PARTITIONS)
        for i, r in enumerate(x for x in records if x.partition == p)
    }
    raw_by_source = {source_of(r): r for r in capture.default}
    twin_after = twin_after_by_source(capture)
    shapes = oracle.placeholder_shapes(capture.options.binary_handling_mode or "bytes")
    last_tx: dict[str, int] = {}  # key -> txId of the row's last writer
    for r in capture.default:
        if r.value is not None:
            last_tx[oracle.canonical_key(r.key)] = oracle.payload(r.value)["source"]["txId"]

    checked = Checked(0, 0, defaultdict(list))
    for out in outputs:
        source = late_to_original[out.header(HEADER_SOURCE).decode()]
        exact = headers_of(out, HEADER_RESELECTED)
        current = headers_of(out, HEADER_RESELECTED_CURRENT)
        # Every placeholder of `after` is filled. A column can still be unresolved in `before`:
        # the key's previous event was re-selected as current (a newer value), which is never
        # stored, so the value just before this event is not known, and is not made up.
        assert not after_placeholders(out, shapes), source
        raw = oracle.payload(raw_by_source[source].value)
        placeholders = set(oracle.placeholder_columns(raw["after"], shapes))
        filled = headers_of(out, HEADER_FILLED)
        assert not set(exact) & set(current), source
        assert set(exact) | set(current) | set(filled) >= placeholders, source
        assert set(exact) | set(current) <= placeholders, source
        after = oracle.payload(out.value)["after"]
        for column in exact:
            assert after[column] == twin_after[source][column], (source, column)
        if exact:
            # proven: nothing wrote the row after this event
            assert raw["source"]["txId"] == last_tx[oracle.canonical_key(out.key)], source
        checked.exact += len(exact)
        checked.current += len(current)
        checked.by_key[oracle.canonical_key(out.key)].append(out)
    return checked
