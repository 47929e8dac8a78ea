"""Property: random CockroachDB changefeed histories, delivered at least once (exact duplicates,
old versions after newer ones, replays after a restart, resolved messages, a backfill), hydrate
into exactly the messages with `before` = the previous full row, each version once; every
later delivery of a version is stale."""

from __future__ import annotations

import json
import string
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import HydrationSettings, Hydrator, RawRecord
from hydrator.core.hydrator import HEADER_STALE
from hydrator.core.settings import OnStale
from hydrator.formats import codec_for
from state.codec import decode_state, encode_state
from tests.support.cockroach_model import ChangefeedModel, Row, as_written
from tests.support.core import engine_step

TOPIC = "crdb.orders"
REGIONS = ["eu", "us-east", "ap"]
words = st.text(alphabet=string.ascii_letters + string.digits + ' "\\/\n€ü', max_size=20)
decimals = st.decimals(allow_nan=False, allow_infinity=False).filter(
    lambda d: abs(d.adjusted()) < 300 and str(d) != "-0"  # beyond a double; JSON's int zero
)
int8 = st.integers(-(2**63), 2**63 - 1)


def _text(value: Any) -> str:
    """JSON text the way CockroachDB writes a value (decimals in their scientific string)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


jsonb = st.recursive(
    st.none() | st.booleans() | int8 | st.integers(-(10**30), 10**30) | decimals | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)
COLUMNS: dict[str, st.SearchStrategy[Any]] = {
    "qty": int8,
    "price": decimals,  # DECIMAL
    "ratio": st.floats(allow_nan=False, allow_infinity=False).map(lambda f: Decimal(repr(f))),
    "name": words,
    "doc": jsonb,  # JSONB
    "tags": st.lists(words, max_size=3),  # STRING[]
    "flag": st.booleans(),
}


def row_for(data: st.DataObject, pk: tuple[int, str], old: Row | None) -> Row:
    """A full row (CockroachDB ships every column): some columns changed from `old`."""
    row = {"id": str(pk[0]), "region": json.dumps(pk[1])}
    for column, values in COLUMNS.items():
        keep = old is not None and data.draw(st.booleans(), label=f"keep {column}")
        row[column] = old[column] if keep and old else _text(data.draw(st.none() | values))
    return row


def build_history(data: st.DataObject, model: ChangefeedModel) -> None:
    clocks = st.sampled_from(["wall", "wall", "logical", "same"])
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        live = model.live_keys()
        action = data.draw(
            st.sampled_from(
                ["write", "write", "write", "delete", "duplicate", "stale", "restart", "resolved"]
                + (["add_column"] if model.columns_added < 2 else [])
            ),
            label="action",
        )
        if action in ("write", "delete"):
            pk = (data.draw(st.integers(1, 6), label="id"), data.draw(st.sampled_from(REGIONS)))
            pk_text = [str(pk[0]), json.dumps(pk[1])]
            old = model.rows.get(f"[{', '.join(pk_text)}]")
            row = row_for(data, pk, old) if action == "write" else None
            model.write(pk_text, row, data.draw(clocks, label="clock"))
        elif action == "duplicate":
            model.duplicate(data.draw(st.integers(1, 4), label="back"))
        elif action == "stale" and model.versions:
            key = data.draw(st.sampled_from(sorted(model.versions)), label="stale key")
            model.stale_version(key, data.draw(st.integers(0, 10), label="version"))
        elif action == "restart":
            model.restart(data.draw(st.integers(1, 8), label="versions back"))
        elif action == "resolved":
            model.resolved()
        elif action == "add_column" and live:
            model.add_column(f"added{model.columns_added}", "true")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    diff=st.booleans(),
    mvcc=st.booleans(),
    key_in_value=st.booleans(),
    forward=st.booleans(),
    alias=st.sampled_from(["cockroachdb", "cockroach", "auto"]),
)
def test_hydrated_changefeed_has_every_version_once_with_its_previous_row(
    data: st.DataObject, diff: bool, mvcc: bool, key_in_value: bool, forward: bool, alias: str
) -> None:
    model = ChangefeedModel(diff=diff, mvcc_timestamp=mvcc, key_in_value=key_in_value)
    build_history(data, model)
    on_stale = OnStale.FORWARD if forward else OnStale.DROP
    hydrator = Hydrator(codec_for(alias), HydrationSettings(on_stale=on_stale))
    states: dict[str | None, Any] = {}
    delivered: set[int] = set()
    for offset, message in enumerate(model.log):
        record = RawRecord(TOPIC, 0, offset, message.key, message.value)
        key = hydrator.route(record)
        step = engine_step(hydrator, states.get(key), record, 0)
        assert not step.dead, step.dead
        if key is not None:
            # through the state codec, as every engine keeps it
            states[key] = decode_state(encode_state(step.state)) if step.state else None
        if message.row_key is None:  # resolved: passed on as it came
            assert [(o.key, o.value) for o in step.emitted] == [(None, message.value)]
            continue
        first = id(message) not in delivered
        delivered.add(id(message))
        if first:
            (output,) = step.emitted
            assert message.expected is not None
            assert as_written(output.value) == as_written(message.expected), offset
            assert output.value.startswith(message.value.rstrip()[:-1])  # the input's own text
        elif forward:
            (output,) = step.emitted
            assert output.value == message.value
            assert (HEADER_STALE, b"true") in output.headers
        else:
            assert step.emitted == () and step.counts == {"stale_dropped": 1}


def test_a_history_covers_every_kind_of_delivery() -> None:
    """The model itself: each way of delivering again produces what it says."""
    model = ChangefeedModel()
    model.write(["1", '"eu"'], {"id": "1", "region": '"eu"', "price": "1.10"})
    model.write(["2", '"eu"'], {"id": "2", "region": '"eu"', "price": "2"}, clock="same")
    model.write(["1", '"eu"'], None, clock="logical")
    model.duplicate(1)
    model.stale_version('[1, "eu"]', 0)
    model.restart(2)
    model.resolved()
    values = [m.value for m in model.log]
    assert values[0] == (
        b'{"after": {"id": 1, "region": "eu", "price": 1.10}, '
        b'"updated": "1700000000000000007.0000000000"}'
    )
    assert b'"updated": "1700000000000000007.0000000000"' in values[1]  # one transaction
    assert b'"after": null, "updated": "1700000000000000007.0000000001"' in values[2]
    assert values[3] == values[2] and values[4] == values[0]
    assert values[5:8] == values[0:3]  # every version since the checkpoint, in order
    assert values[8] == b'{"resolved": "1700000000000000007.0000000001"}'
    assert model.log[2].expected is not None and model.log[2].expected.endswith(
        b', "before": {"id": 1, "region": "eu", "price": 1.10}}'
    )
