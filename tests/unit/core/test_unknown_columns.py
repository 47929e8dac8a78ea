"""The columns a state does not know (StateRecord.unknown): an event that applied left them
unresolved, so the stored image lacks them. An output that takes them from the image lists them
in `hydrator.unresolved`; a column the image never had (added to the table since) is not one."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydrator.core import Handoff, HydrationSettings, Hydrator, OnUnresolved, RawRecord
from hydrator.core.changes import HEADER_CHANGED
from hydrator.core.records import HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.core.reselected import Reselected
from hydrator.events import Read
from hydrator.formats import FormatOptions
from hydrator.formats.placeholders import PlaceholderForms
from state.codec import decode_state, encode_state
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step
from tests.support.debezium_model import COLUMNS, DebeziumModel, payload_of
from tests.unit.core.test_hydration_properties import build_history, row_values

VALUE_COLUMNS = [c for c in COLUMNS if c != "id"]

P = "__debezium_unavailable_value"
KEY = b'{"id":1}'


def _record(
    op: str,
    after: dict[str, Any] | None,
    before: dict[str, Any] | None,
    lsn: int,
    headers: tuple[tuple[str, bytes], ...] = (),
) -> RawRecord:
    value = {"before": before, "after": after, "op": op, "source": {"lsn": lsn, "txId": lsn}}
    return RawRecord("t", 0, lsn, KEY, orjson.dumps(value), headers)


def _run(
    hydrator: Hydrator, records: list[RawRecord], state: StateRecord | None = None
) -> tuple[StateRecord | None, list[tuple[dict[str, bytes | None], dict[str, Any]]]]:
    """The records through the core as an engine applies them, the state through its codec
    after each; the outputs as (headers, payload)."""
    outputs = []
    for record in records:
        step = engine_step(hydrator, state, record, 0)
        state = decode_state(encode_state(step.state)) if step.state is not None else None
        outputs += [(dict(out.headers), orjson.loads(out.value or b"null")) for out in step.emitted]
    return state, outputs


def _unresolved(headers: dict[str, bytes | None]) -> bytes | None:
    return headers.get(HEADER_UNRESOLVED)


def test_an_unresolved_update_then_a_delete_lists_the_column() -> None:
    state, outs = _run(
        debezium_hydrator(),
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("d", None, {"id": 1, "doc": None, "n": None}, 11),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", b"doc"]
    assert outs[1][1]["before"] == {"id": 1, "n": 1}
    assert state is not None and state.deleted and state.unknown == ()


def test_the_state_names_the_unknown_columns_and_keeps_them_through_the_codec() -> None:
    state, _ = _run(
        debezium_hydrator(), [_record("u", {"id": 1, "doc": P, "x": P, "n": 1}, None, 10)]
    )
    assert state is not None and state.image == {"id": 1, "n": 1}
    assert state.unknown == ("doc", "x")


def test_a_column_added_to_the_table_is_not_unknown() -> None:
    """Rule 1: a new column starts being tracked. The image from before the ADD COLUMN lacks it,
    and a `before` made of that image says nothing false about a column it never held."""
    _, outs = _run(
        debezium_hydrator(),
        [
            _record("c", {"id": 1, "n": 1}, None, 10),
            # ALTER TABLE t ADD COLUMN extra: the delete's key-only before names it
            _record("d", None, {"id": 1, "n": None, "extra": None}, 11),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [None, None]
    assert outs[1][1]["before"] == {"id": 1, "n": 1}
    # and an update with a null before after the ADD COLUMN
    _, outs = _run(
        debezium_hydrator(),
        [
            _record("c", {"id": 1, "n": 1}, None, 10),
            _record("u", {"id": 1, "n": 2, "extra": 5}, None, 11),
        ],
    )
    assert _unresolved(outs[1][0]) is None
    assert outs[1][1]["before"] == {"id": 1, "n": 1}


def test_an_event_that_ships_the_column_clears_it() -> None:
    """Its own `before`, made of the image, still lacks the column (listed); the events after
    it are whole."""
    _, outs = _run(
        debezium_hydrator(),
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("u", {"id": 1, "doc": "D", "n": 2}, None, 11),
            _record("u", {"id": 1, "doc": P, "n": 3}, None, 12),
            _record("d", None, {"id": 1, "doc": None, "n": None}, 13),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", b"doc", None, None]
    assert outs[1][1]["after"] == {"id": 1, "doc": "D", "n": 2}
    assert outs[2][1]["before"] == {"id": 1, "doc": "D", "n": 2}
    assert outs[2][1]["after"] == {"id": 1, "doc": "D", "n": 3}
    assert outs[3][1]["before"] == {"id": 1, "doc": "D", "n": 3}


def test_a_shipped_column_is_changed_though_the_before_lacks_it() -> None:
    """`hydrator.changed` names a column whose new value is known: a partial-update sink must
    write it, whatever the `before` could not say."""
    _, outs = _run(
        debezium_hydrator(),
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("u", {"id": 1, "doc": "D", "n": 1}, None, 11),
        ],
    )
    headers = outs[1][0]
    assert _unresolved(headers) == b"doc"
    assert headers[HEADER_CHANGED] == b"doc"


def test_a_create_resets_what_the_state_does_not_know() -> None:
    _, outs = _run(
        debezium_hydrator(),
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("d", None, {"id": 1, "doc": None, "n": None}, 11),
            _record("c", {"id": 1, "doc": "D", "n": 1}, None, 12),
            _record("d", None, {"id": 1, "doc": None, "n": None}, 13),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", b"doc", None, None]
    assert outs[3][1]["before"] == {"id": 1, "doc": "D", "n": 1}


def test_a_dropped_column_is_no_longer_unknown() -> None:
    """A full-row format's event that no longer names the column: the table dropped it."""
    state, outs = _run(
        debezium_hydrator(),
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            # ALTER TABLE t DROP COLUMN doc; the delete's before no longer names it either
            _record("d", None, {"id": 1, "n": None}, 11),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", None]
    state, outs = _run(
        debezium_hydrator(),
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("u", {"id": 1, "n": 2}, None, 11),
            _record("u", {"id": 1, "n": 3}, None, 12),
        ],
    )
    # the update's `after` no longer names doc: neither does its `before`, made of the image
    assert [_unresolved(h) for h, _ in outs] == [b"doc", None, None]
    assert outs[1][1]["before"] == {"id": 1, "n": 1}
    assert state is not None and state.unknown == ()


def test_on_unresolved_null_renders_the_unknown_column_as_null() -> None:
    nulls = debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.NULL))
    state, outs = _run(
        nulls,
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("u", {"id": 1, "doc": P, "n": 2}, None, 11),
            _record("d", None, {"id": 1, "doc": None, "n": None}, 12),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", b"doc", b"doc"]
    assert outs[1][1]["after"] == {"id": 1, "doc": None, "n": 2}
    assert outs[1][1]["before"] == {"id": 1, "doc": None, "n": 1}
    assert outs[2][1]["before"] == {"id": 1, "doc": None, "n": 2}
    # the nulls rendered are not values: the state still does not know doc
    assert state is not None and state.deleted


def test_a_key_only_before_is_not_made_complete_with_fill_before_off() -> None:
    """`--no-fill-before` takes nothing from the image: nothing to list."""
    hydrator = debezium_hydrator(HydrationSettings(fill_before=False))
    _, outs = _run(
        hydrator,
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("d", None, {"id": 1, "doc": None, "n": None}, 11),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", None]


def test_a_re_select_proven_exact_clears_it_a_current_one_does_not() -> None:
    hydrator = debezium_hydrator()
    first = engine_step(hydrator, None, _record("u", {"id": 1, "doc": P, "n": 1}, None, 10), 0)
    assert first.state is not None and first.state.unknown == ("doc",)
    update = _record("u", {"id": 1, "doc": P, "n": 2}, None, 11)
    delete = _record("d", None, {"id": 1, "doc": None, "n": None}, 12)
    for proven, marked in ((frozenset({"doc"}), None), (frozenset(), b"doc")):
        read = Read(update)
        reselected = Reselected({"doc": "D"}, proven)
        step = hydrator.process(first.state, read, hydrator.route(read), 0, reselected)  # type: ignore[arg-type]
        assert step.state is not None
        assert step.state.unknown == (() if proven else ("doc",))
        (out,) = engine_step(hydrator, step.state, delete, 0).emitted
        assert dict(out.headers).get(HEADER_UNRESOLVED) == marked


def test_a_patch_stream_lists_an_unknown_column_its_events_do_not_ship() -> None:
    """--fill-absent: a stored column an event does not name is filled from the image; one the
    state does not know cannot be, and is listed, in `after` and in `before`."""
    hydrator = debezium_hydrator(options=FormatOptions(fill_absent=True))
    state, outs = _run(
        hydrator,
        [
            _record("u", {"id": 1, "doc": P, "n": 1}, None, 10),
            _record("u", {"id": 1, "n": 2}, {"id": 1, "n": 1}, 11),
            _record("u", {"id": 1, "doc": "D"}, None, 12),
            _record("u", {"id": 1, "n": 3}, {"id": 1, "n": 2}, 13),
        ],
    )
    assert [_unresolved(h) for h, _ in outs] == [b"doc", b"doc", b"doc", None]
    assert outs[1][1]["after"] == {"id": 1, "n": 2}
    assert outs[3][1]["after"] == {"id": 1, "doc": "D", "n": 3}
    assert outs[3][1]["before"] == {"id": 1, "doc": "D", "n": 2}
    assert state is not None and state.unknown == ()


def test_a_handoff_image_lacks_what_the_old_key_did_not_know_and_the_new_key_says_so() -> None:
    hydrator = debezium_hydrator()
    old = engine_step(hydrator, None, _record("u", {"id": 1, "doc": P, "n": 1}, None, 10), 0)
    delete = RawRecord(
        "t",
        0,
        11,
        KEY,
        orjson.dumps(
            {
                "before": {"id": 1, "doc": None, "n": None},
                "after": None,
                "op": "d",
                "source": {"lsn": 12, "txId": 12},
            }
        ),
        (("__debezium.newkey", b'{"id":2}'),),
    )
    step = engine_step(hydrator, old.state, delete, 0)
    (handoff,) = step.handoffs
    new = hydrator.receive_handoff(None, handoff, 0).state
    create = RawRecord(
        "t",
        0,
        12,
        b'{"id":2}',
        orjson.dumps(
            {
                "before": None,
                "after": {"id": 2, "doc": P, "n": 1},
                "op": "c",
                "source": {"lsn": 12, "txId": 12},
            }
        ),
        (("__debezium.oldkey", KEY),),
    )
    created = engine_step(hydrator, new, create, 0)
    (out,) = created.emitted
    assert dict(out.headers)[HEADER_UNRESOLVED] == b"doc"
    assert created.state is not None and created.state.unknown == ("doc",)


def test_the_codec_writes_the_field_only_when_there_are_unknown_columns() -> None:
    plain = StateRecord(image={"a": 1}, pos=(1, 2))
    assert encode_state(plain)[1:2] == b"\x98"  # eight fields, as earlier releases wrote
    unknown = StateRecord(image={"a": 1}, pos=(1, 2), unknown=("doc", "b"))
    assert encode_state(unknown)[1:2] == b"\x9b"  # eleven
    assert decode_state(encode_state(unknown)) == unknown
    both = StateRecord(
        image={"a": 1}, pos=None, bootstrap=(), unknown=("doc",), cell_times={"a": 3}
    )
    assert decode_state(encode_state(both)) == both
    # a bootstrapped record as an earlier release wrote it still reads
    marked = StateRecord(image={"a": 1}, bootstrap=(1, 2, 3))
    assert encode_state(marked)[1:2] == b"\x9a" and decode_state(encode_state(marked)) == marked


# -- the property: whatever the stream missed, an output never passes a wrong value off ---------


def _honest(hydrated: dict[str, Any] | None, full: dict[str, Any] | None, listed: set[str]) -> bool:
    """`hydrated` equals `full` outside the listed columns."""
    if hydrated is None or full is None:
        return hydrated is full
    strip = lambda image: {c: v for c, v in image.items() if c not in listed}  # noqa: E731
    return strip(hydrated) == strip(full)


def _continue_with_a_key_change(data: st.DataObject, model: DebeziumModel) -> int:
    """A primary-key change of a live row (one is inserted if none is), then some later events
    of the new key; the index in `model.log` of the key change's first record."""
    if not model.rows:
        model.insert({"id": 1, **row_values(data, VALUE_COLUMNS)})
    key = data.draw(st.sampled_from(sorted(model.rows)), label="re-keyed id")
    new_key = max(model.rows) + 1 + data.draw(st.integers(0, 2), label="new id past the rest")
    start = len(model.log)
    touched = data.draw(st.lists(st.sampled_from(VALUE_COLUMNS), unique=True), label="cols")
    model.change_key(key, new_key, row_values(data, touched))
    for _ in range(data.draw(st.integers(0, 4), label="later events")):
        action = data.draw(st.sampled_from(["update", "change_key", "redeliver"]), label="then")
        if action == "update":
            touched = data.draw(st.lists(st.sampled_from(VALUE_COLUMNS), unique=True), label="c")
            model.update(new_key, row_values(data, touched))
        elif action == "change_key":
            key, new_key = new_key, max(model.rows) + 1
            model.change_key(key, new_key, {})
        else:
            model.redeliver(data.draw(st.integers(1, 3), label="redelivered"))
    if data.draw(st.booleans(), label="then deleted"):
        model.delete(new_key)
    return start


def _exact_reselect(rendered: Any) -> Reselected | None:
    """What a re-select that reads the row as it was at this event gives (every placeholder
    column of its `after`, proven: the model knows the row's true value there)."""
    full = rendered.full_value
    if full is None or full["after"] is None or rendered.default.value is None:
        return None
    shipped = payload_of(rendered.default.value)["after"] or {}
    forms = PlaceholderForms(FormatOptions().placeholder_bytes)
    columns = [c for c, v in shipped.items() if v is not None and forms.matches_shape(v)]
    if not columns:
        return None
    return Reselected({c: full["after"][c] for c in columns}, frozenset(columns))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    on_unresolved=st.sampled_from([OnUnresolved.KEEP, OnUnresolved.NULL]),
    join=st.sampled_from(["anywhere", "at a key change"]),
    reselect=st.booleans(),
)
def test_a_stream_joined_late_never_passes_off_an_incomplete_row(
    data: st.DataObject, on_unresolved: OnUnresolved, join: str, reselect: bool
) -> None:
    """The hydrator starts part way into a row history (its state knows nothing of what came
    before), anywhere or right at a primary-key change (the new key's first event is a key
    change whose old key it never saw): every output equals what a REPLICA IDENTITY FULL table
    ships, except in the columns its `hydrator.unresolved` lists, in `after` and in any `before`
    it carries (a key-only `before` it cannot complete lists its columns; a null one claims
    nothing). With a re-select that reads each row as it was at its event (`reselect`), what
    nothing else fills comes from it, through the key change's release too, and no `after` is
    left unresolved."""
    model = DebeziumModel(PlaceholderForms(FormatOptions().placeholder_bytes))
    build_history(data, model)
    if join == "anywhere":
        start = data.draw(st.integers(0, len(model.log)), label="the stream joins at")
    else:
        start = _continue_with_a_key_change(data, model)
    hydrator = debezium_hydrator(HydrationSettings(on_unresolved=on_unresolved))
    by_offset = {r.default.offset: r for r in model.log}
    given = {r.default.source: _exact_reselect(r) for r in model.log} if reselect else {}
    supplied = {source: chosen for source, chosen in given.items() if chosen is not None}
    states: dict[str, StateRecord | None] = defaultdict(lambda: None)
    outputs = []
    # handoffs on their way, each due before the record of that index (late ones make the new
    # key's CREATE park, and its handoff release it)
    in_flight: list[tuple[int, Handoff]] = []
    index = start

    def take(transition: Any) -> None:
        assert not transition.dead, transition.dead
        outputs.extend(transition.emitted)
        for handoff in transition.handoffs:
            delay = data.draw(st.integers(0, 3), label="handoff delay")
            in_flight.append((index + 1 + delay, handoff))

    def deliver(up_to: float) -> None:
        while due := [item for item in in_flight if item[0] <= up_to]:
            for item in due:
                in_flight.remove(item)
                handoff = item[1]
                step = hydrator.receive_handoff(states[handoff.new_key], handoff, 0, supplied)
                states[handoff.new_key] = step.state
                take(step)

    for index, rendered in enumerate(model.log[start:], start):
        deliver(index)
        key = hydrator.route(rendered.default)
        assert isinstance(key, str)
        read = Read(rendered.default)
        step = hydrator.process(states[key], read, key, 0, supplied.get(read.record.source))
        states[key] = decode_state(encode_state(step.state)) if step.state else None
        take(step)
    deliver(float("inf"))
    # A CREATE whose key change's DELETE came before the join waits in vain: the handoff
    # timeout releases it unresolved (and without a re-select). What it held back may hold a key
    # change whose handoff another parked key waits for, and a later CREATE of its own that
    # waits again: such a chain comes apart over rounds of timeouts and the handoffs they send.
    timed_out: set[str] = set()
    now_ms = 0
    for _ in range(len(model.log) + 1):
        parked = [(key, s) for key, s in states.items() if s is not None and s.is_parked]
        if not parked:
            break
        now_ms += hydrator.settings.handoff_timeout_ms
        for key, state in parked:
            timed_out.update(record.source for record in state.parked)
            step = hydrator.tick(state, now_ms)
            states[key] = step.state
            take(step)
        deliver(float("inf"))
    assert not any(s is not None and s.is_parked for s in states.values())
    for out in outputs:
        if out.value is None:
            continue
        offset = int(dict(out.headers)[HEADER_SOURCE].decode().rsplit(":", 1)[1])
        full = by_offset[offset].full_value
        assert full is not None
        got = payload_of(out.value)
        listed = set((dict(out.headers).get(HEADER_UNRESOLVED) or b"").decode().split(",")) - {""}
        assert _honest(got["after"], full["after"], listed), (got, full, listed)
        if (
            reselect
            and got["after"] is not None
            and by_offset[offset].default.source not in timed_out
        ):
            shipped = payload_of(by_offset[offset].default.value or b"null")["after"] or {}
            assert not listed & set(shipped), (got, listed)  # `after` is whole
        if got["before"] is not None:
            assert _honest(got["before"], full["before"], listed), (got, full, listed)
            if on_unresolved is OnUnresolved.NULL:
                assert all(got["before"].get(c, P) is None for c in listed), (got, listed)
