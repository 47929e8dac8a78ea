"""Property: random YDB table histories, written by the changefeed in UPDATES, NEW_IMAGE or
NEW_AND_OLD_IMAGES mode (with equal virtual timestamps, identical consecutive records, an
initial scan and barriers; partitions read in any interleaving), hydrate into exactly the
images NEW_AND_OLD_IMAGES carries for the same changes (tests/support/ydb_model.py), under
`--format ydb` and under `--format auto` alike."""

from __future__ import annotations

import base64
import string
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator import exact
from hydrator.core import Hydrator
from hydrator.core.records import HEADER_SOURCE
from hydrator.formats import codec_for
from state.codec import decode_state, encode_state
from tests.support.core import engine_step
from tests.support.ydb_model import ID_SPACE, MODES, VALUE_COLUMNS, Key, YdbTable

words = st.text(alphabet=string.ascii_letters + string.digits + " éü€ж", max_size=20)
JSON_LEAVES = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | words
COLUMN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "name": words,
    "amount": st.integers(0, 2**64 - 1),  # Uint64
    "balance": st.builds(  # Decimal(35, 10): every digit, as YDB writes it
        lambda whole, fraction: f"{whole}.{fraction:010d}",
        st.integers(-(10**24), 10**24),
        st.integers(0, 10**10 - 1),
    ),
    "meta": st.recursive(  # a Json column: nested JSON, integers of any width
        JSON_LEAVES,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
        max_leaves=5,
    ),
    "blob": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),  # String
    "flag": st.booleans(),
}
KEYS = st.tuples(st.integers(0, ID_SPACE - 1), st.sampled_from(["eu", "us", "ап"]))


def values(data: st.DataObject, columns: tuple[str, ...] | list[str]) -> dict[str, Any]:
    return {c: data.draw(st.none() | COLUMN_VALUES[c], label=c) for c in columns}


def some_columns(data: st.DataObject) -> list[str]:
    return data.draw(st.lists(st.sampled_from(VALUE_COLUMNS), unique=True), label="columns")


def build_history(data: st.DataObject, table: YdbTable) -> None:
    pool = data.draw(st.lists(KEYS, min_size=1, max_size=6, unique=True), label="keys")
    for key in data.draw(st.lists(st.sampled_from(pool), unique=True), label="preloaded"):
        table.preload(key, values(data, VALUE_COLUMNS))
    last: Callable[[bool], None] | None = None
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        action = data.draw(
            st.sampled_from(
                ["upsert", "update", "update", "replace", "erase", "scan", "resolved", "again"]
            ),
            label="action",
        )
        same_ts = data.draw(st.integers(0, 3), label="merged with the previous change") == 0
        if action == "scan":
            table.scan_some(data.draw(st.integers(1, 3), label="scanned"))
        elif action == "resolved":
            table.resolved()
        elif action == "again" and last is not None:
            last(True)  # the same statement, merged: an identical record, a real change
        elif action != "again":
            last = statement(data, table, action, data.draw(st.sampled_from(pool), label="key"))
            last(same_ts)
    table.finish_scan()


def statement(
    data: st.DataObject, table: YdbTable, action: str, key: Key
) -> Callable[[bool], None]:
    if action == "erase":
        return lambda same_ts: table.erase(key, same_ts)
    # A row is created with every column named: the hydrator cannot know columns it never saw
    # (test_ydb_format.py shows what a partial UPSERT of a new row gives).
    exists = key in table.rows
    columns = values(data, some_columns(data) if exists else VALUE_COLUMNS)
    if action == "upsert":
        return lambda same_ts: table.upsert(key, columns, same_ts)
    if action == "update":
        return lambda same_ts: table.update(key, columns, same_ts)
    return lambda same_ts: table.replace(key, columns, same_ts)


def interleaved(data: st.DataObject, table: YdbTable) -> list[int]:
    """Indexes of the log in an order a consumer of all partitions may read them: each
    partition in offset order, partitions interleaved at random."""
    queues: dict[int, list[int]] = {}
    for index, rendered in enumerate(table.log):
        queues.setdefault(rendered.partition, []).append(index)
    order = []
    while queues:
        partition = data.draw(st.sampled_from(sorted(queues)), label="next partition")
        order.append(queues[partition].pop(0))
        if not queues[partition]:
            del queues[partition]
    return order


def hydrate(data: st.DataObject, table: YdbTable, hydrator: Hydrator) -> dict[str, bytes]:
    """Outputs by `hydrator.source`, driving the core as an engine does."""
    records = table.records()
    states: dict[str | None, Any] = {}
    outputs: dict[str, bytes] = {}
    for index in interleaved(data, table):
        record = records[index]
        key = hydrator.route(record)
        assert key is None or isinstance(key, str), key
        step = engine_step(hydrator, states.get(key), record, 0)
        assert not step.dead, step.dead
        assert len(step.emitted) == 1, step.counts
        if key is not None:
            states[key] = step.state
            assert step.state is not None
            assert decode_state(encode_state(step.state)) == step.state
        out = step.emitted[0]
        assert (out.partition, out.key) == (record.partition, None)
        assert out.value is not None
        outputs[dict(out.headers)[HEADER_SOURCE].decode()] = out.value
    return outputs


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    mode=st.sampled_from(MODES),
    virtual_timestamps=st.booleans(),
    partitions=st.integers(1, 4),
    name=st.sampled_from(["ydb", "auto"]),
)
def test_hydrated_changefeed_carries_the_new_and_old_images(
    data: st.DataObject, mode: str, virtual_timestamps: bool, partitions: int, name: str
) -> None:
    table = YdbTable(mode, virtual_timestamps, partitions)
    build_history(data, table)
    outputs = hydrate(data, table, Hydrator(codec_for(name)))
    records = table.records()
    assert len(outputs) == len(records)
    for record, rendered in zip(records, table.log, strict=True):
        got = outputs[record.source]
        if rendered.barrier:
            assert got == record.value  # forwarded byte for byte
        canonical_got = exact.dumps(exact.loads(got), sort_keys=True)
        assert canonical_got == exact.dumps(rendered.expected(), sort_keys=True), record.source
