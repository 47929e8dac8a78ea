"""Property: random Cassandra table histories, rendered as the Debezium Cassandra connector
writes them and delivered as a cluster delivers them (every replica's copy, out of order),
hydrate into what the model in tests/support/cassandra_model.py computes from the writes alone;
delivered in write order, into the table's true rows."""

from __future__ import annotations

import random
import string
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator import exact
from hydrator.core import Hydrator, Read
from hydrator.core.records import HEADER_FILLED, HEADER_UNRESOLVED
from hydrator.formats import codec_for
from state.codec import decode_state, encode_state
from state.record import StateRecord
from tests.support.cassandra_model import (
    COLUMNS,
    REGULAR_COLUMNS,
    CassandraTable,
    Event,
    Key,
    deliveries,
    expected_outputs,
    filled,
    records,
)
from tests.support.core import engine_step

words = st.text(alphabet=string.ascii_letters + " éü€", max_size=12)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "name": words,
    "score": st.integers(-(2**63), 2**63 - 1) | st.sampled_from([10**30, -(10**25)]),
    "tags": st.lists(words, max_size=3),
    "price": st.decimals(allow_nan=False, allow_infinity=False, places=6).map(str),
    "note": words,
}
KEYS: list[Key] = [(1, "a"), (1, "b"), (2**63 - 1, "a")]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def written(data: st.DataObject) -> dict[str, Any]:
    columns = data.draw(st.lists(st.sampled_from(REGULAR_COLUMNS), unique=True), label="columns")
    return {c: data.draw(st.none() | VALUES[c], label=c) for c in columns}


def build_history(data: st.DataObject, table: CassandraTable, ranges: bool) -> None:
    actions = ["insert", "update", "update", "update", "delete", "snapshot"]
    for _ in range(data.draw(st.integers(1, 25), label="steps")):
        key = data.draw(st.sampled_from(KEYS), label="key")
        action = data.draw(st.sampled_from([*actions, "range"] if ranges else actions))
        ttl = data.draw(st.none() | st.integers(1, 8), label="ttl")
        if action == "insert":
            table.insert(key, written(data), ttl)
        elif action == "update":
            table.update(key, written(data), ttl)
        elif action == "delete":
            table.delete(key, tombstone=data.draw(st.booleans(), label="tombstone"))
        elif action == "snapshot":
            table.snapshot(key)
        else:
            table.range_tombstone(key[0], "a", "z")


def hydrate(
    arrivals: list[Event], format_name: str = "cassandra"
) -> tuple[list[Any], dict[str, StateRecord | None]]:
    """Each arrival's output (value document, filled, unresolved), and the states."""
    hydrator = Hydrator(codec_for(format_name))
    states: dict[str, StateRecord | None] = {}
    outputs = []
    for raw in records(arrivals):
        key = hydrator.route(raw)
        assert isinstance(key, str)
        step = engine_step(hydrator, states.get(key), raw, 0)
        assert not step.dead, step.dead
        (out,) = step.emitted
        headers = dict(out.headers)
        outputs.append(
            (
                None if out.value is None else exact.loads(out.value),
                _columns(headers.get(HEADER_FILLED)),
                _columns(headers.get(HEADER_UNRESOLVED)),
            )
        )
        states[key] = step.state
    for state in states.values():
        if state is not None:
            assert decode_state(encode_state(state)) == state
    return outputs, states


def _columns(header: bytes | None) -> tuple[str, ...]:
    return () if header is None else tuple(header.decode().split(","))


@SETTINGS
@given(
    data=st.data(),
    with_schema=st.booleans(),
    rng=st.randoms(use_true_random=False),
    format_name=st.sampled_from(["cassandra", "auto"]),
)
def test_out_of_order_replica_deliveries_hydrate_as_the_arrived_writes_say(
    data: st.DataObject, with_schema: bool, rng: random.Random, format_name: str
) -> None:
    table = CassandraTable(with_schema, rng=random.Random(rng.random()))
    build_history(data, table, ranges=True)
    arrivals = deliveries(table.events, rng)
    outputs, states = hydrate(arrivals, format_name)
    expected = expected_outputs(arrivals, with_schema)
    for index, ((document, done, unknown), want) in enumerate(zip(outputs, expected, strict=True)):
        assert document == want.document(), index
        assert set(done) == set(want.filled) and set(unknown) == set(want.unresolved), index

    # Whatever the order, every row's state ends at the latest write of each cell.
    codec = codec_for("cassandra")
    for event in table.events:
        if not event.writes_cells:
            continue
        state = states[codec.key(Read(records([event])[0])) or ""]
        assert state is not None and state.image is not None
        latest = {
            column: max(history, key=lambda write: write[0])
            for column, history in table.writes[event.key].items()
        }
        assert state.image == {c: cell for c, (_, cell) in latest.items()}
        assert state.cell_times == {c: time for c, (time, _) in latest.items()}


@SETTINGS
@given(data=st.data(), with_schema=st.booleans(), rng=st.randoms(use_true_random=False))
def test_delivered_in_write_order_every_event_carries_the_true_row(
    data: st.DataObject, with_schema: bool, rng: random.Random
) -> None:
    table = CassandraTable(with_schema, rng=random.Random(rng.random()))
    build_history(data, table, ranges=False)
    outputs, _ = hydrate(table.events)
    seen: dict[Key, set[str]] = defaultdict(set)
    for event, (document, done, unknown) in zip(table.events, outputs, strict=True):
        if event.op in ("i", "u"):
            assert event.after is not None
            truth = table.read(event.key, event.time)
            after = (document["payload"] if with_schema else document)["after"]
            for column in COLUMNS:
                if event.after[column] is not None:
                    assert after[column] == event.after[column]
                elif column in seen[event.key]:
                    assert after[column] == filled(truth[column]), column
                    assert column in done
                else:
                    assert after[column] is None and column in unknown
        if event.writes_cells:
            assert event.after is not None
            seen[event.key] |= {c for c in COLUMNS if event.after[c] is not None}
