"""The Spark engine's bootstrap input without Spark: a record of `<app>-bootstrap` routes to its
key's group, sets the state before the group's inputs of the same batch, and never replaces a
state the stream made."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson
import pandas as pd

from hydrator.core import HydrationSettings
from hydrator.core.visibility import SourceSnapshot
from hydrator.engines.spark.routing import route
from hydrator.engines.spark.stateful import HydratorSpec, group_function
from hydrator.seeding import images
from hydrator.topology.layout import Topology
from state.codec import decode_state, encode_state
from tests.unit.engines.spark.test_spark_steps import (
    PLACEHOLDER,
    TOPIC,
    FakeState,
    counts_of,
    event,
    output_rows,
    records_of,
    source_batch,
)

TOPOLOGY = Topology("app", {TOPIC: "out"}, 4)
GROUP = f'{TOPIC}\x00{{"id":7}}'


def run(rows: list[tuple[Any, ...]], states: dict[str, FakeState]) -> list[dict[str, Any]]:
    spec = HydratorSpec(HydrationSettings())
    (routed,) = route(spec, TOPOLOGY.handoff_topic, TOPOLOGY.bootstrap_topic)(
        iter([source_batch(rows)])
    )
    groups: dict[str, list[bytes]] = defaultdict(list)
    for group, record in zip(*(c.to_pylist() for c in routed.columns), strict=True):
        groups[group].append(record)
    hydrate = group_function(spec, TOPOLOGY)
    frames: list[pd.DataFrame] = []
    for group, records in groups.items():
        frame = pd.DataFrame({"group": [group] * len(records), "record": records})
        frames += hydrate((group,), iter([frame]), states.setdefault(group, FakeState()))
    return output_rows(frames)


def bootstrap_row(doc: str) -> tuple[Any, ...]:
    record = images.snapshot_row({"id": 7, "n": 1, "doc": doc}, SourceSnapshot.parse("5:6:"), 0)
    return (TOPOLOGY.bootstrap_topic, 0, 3, GROUP.encode(), encode_state(record), None, 0)


def test_a_bootstrap_record_fills_the_first_event_of_its_batch() -> None:
    states: dict[str, FakeState] = {}
    value = orjson.loads(event(7, 101, PLACEHOLDER))
    value["source"]["txId"] = 9  # after the snapshot 5:6:
    update = (TOPIC, 1, 11, b'{"id":7}', orjson.dumps(value), None, 6)
    rows = run([update, bootstrap_row("D" * 3000)], states)
    (record,) = records_of(rows)
    assert orjson.loads(record["value"])["after"]["doc"] == "D" * 3000
    assert counts_of(rows)["bootstrapped_keys"] == 1
    assert counts_of(rows)["bootstrap_applied_events"] == 1


def test_a_bootstrap_record_never_replaces_the_stream_s_state() -> None:
    states: dict[str, FakeState] = {}
    run([(TOPIC, 1, 10, b'{"id":7}', event(7, 100, "streamed"), None, 5)], states)
    rows = run([bootstrap_row("older")], states)
    assert counts_of(rows).get("bootstrapped_keys", 0) == 0
    stored = decode_state(states[GROUP].get[1])
    assert stored.image is not None and stored.image["doc"] == "streamed"
