"""The rules of docs/rules.md one at a time, on hand-written Debezium events."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from hydrator.core import (
    HydrationSettings,
    Hydrator,
    OnStale,
    OnUnresolved,
    RawRecord,
    UnresolvedColumnsError,
)
from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.formats import FormatOptions
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step

P = "__debezium_unavailable_value"
BIG = "x" * 3000


def record(
    op: str,
    after: dict[str, Any] | None,
    *,
    key: int = 1,
    lsn: int,
    offset: int = 0,
    before: dict[str, Any] | None = None,
    headers: tuple = (),
) -> RawRecord:
    source = {"lsn": lsn, "sequence": orjson.dumps([str(lsn - 1), str(lsn)]).decode()}
    value = orjson.dumps({"before": before, "after": after, "source": source, "op": op})
    return RawRecord("raw", 2, offset, orjson.dumps({"id": key}), value, headers)


def after_of(transition: Any) -> dict[str, Any]:
    return orjson.loads(transition.emitted[0].value)["after"]


def run(hydrator: Hydrator, *records: RawRecord, state: StateRecord | None = None) -> Any:
    transition = None
    for item in records:
        transition = engine_step(hydrator, state, item, 0)
        state = transition.state
    return transition


def inserted(hydrator: Hydrator) -> StateRecord:
    return run(hydrator, record("c", {"id": 1, "big": BIG, "n": 1}, lsn=10)).state


def test_fill_copies_state_value_and_names_the_column() -> None:
    hydrator = debezium_hydrator()
    out = run(hydrator, record("u", {"id": 1, "big": P, "n": 2}, lsn=20), state=inserted(hydrator))
    assert after_of(out) == {"id": 1, "big": BIG, "n": 2}
    headers = dict(out.emitted[0].headers)
    assert headers[HEADER_FILLED] == b"big"
    assert HEADER_UNRESOLVED not in headers
    assert headers[HEADER_SOURCE] == b"raw:2:0"
    assert out.emitted[0].partition == 2


def test_nothing_to_fill_passes_the_original_bytes() -> None:
    hydrator = debezium_hydrator(HydrationSettings(fill_before=False))
    original = record("u", {"id": 1, "big": "new", "n": 2}, lsn=20)
    out = run(hydrator, original, state=inserted(hydrator))
    assert out.emitted[0].value is original.value


def test_dropped_column_is_not_resurrected_and_new_column_is_tracked() -> None:
    hydrator = debezium_hydrator()
    state = run(
        hydrator, record("u", {"id": 1, "n": 2, "extra": "e"}, lsn=20), state=inserted(hydrator)
    ).state
    assert state.image == {"id": 1, "n": 2, "extra": "e"}


def test_before_null_becomes_the_old_image() -> None:
    hydrator = debezium_hydrator()
    out = run(hydrator, record("u", {"id": 1, "big": P, "n": 2}, lsn=20), state=inserted(hydrator))
    assert orjson.loads(out.emitted[0].value)["before"] == {"id": 1, "big": BIG, "n": 1}


def test_key_only_delete_before_becomes_the_old_image() -> None:
    hydrator = debezium_hydrator()
    out = run(
        hydrator,
        record("d", None, before={"id": 1, "big": None, "n": None}, lsn=20),
        state=inserted(hydrator),
    )
    assert orjson.loads(out.emitted[0].value)["before"] == {"id": 1, "big": BIG, "n": 1}
    assert out.state.deleted and out.state.image is None and out.state.pos == (19, 20)


def test_no_fill_before_keeps_a_null_before() -> None:
    hydrator = debezium_hydrator(HydrationSettings(fill_before=False))
    out = run(hydrator, record("u", {"id": 1, "big": P, "n": 2}, lsn=20), state=inserted(hydrator))
    assert orjson.loads(out.emitted[0].value)["before"] is None


def test_missing_columns_in_a_partial_before_are_filled() -> None:
    hydrator = debezium_hydrator()
    out = run(
        hydrator,
        record("u", {"id": 1, "big": P, "n": 2}, before={"id": 1, "big": P, "n": 1}, lsn=20),
        state=inserted(hydrator),
    )
    assert orjson.loads(out.emitted[0].value)["before"] == {"id": 1, "big": BIG, "n": 1}


def test_kafka_tombstone_passes_through() -> None:
    hydrator = debezium_hydrator()
    state = inserted(hydrator)
    tombstone = RawRecord("raw", 2, 9, b'{"id":1}', None, (("h", b"v"),))
    out = engine_step(hydrator, state, tombstone, 0)
    assert out.state is state
    assert out.emitted[0].value is None
    assert out.emitted[0].headers == (("h", b"v"), (HEADER_SOURCE, b"raw:2:9"))


def test_truncate_passes_through() -> None:
    value = orjson.dumps({"op": "t", "before": None, "after": None, "source": {}})
    out = engine_step(debezium_hydrator(), None, RawRecord("raw", 0, 0, None, value), 0)
    assert out.emitted[0].value == value and out.counts == {"passthrough": 1}


@pytest.mark.parametrize("lsn", [10, 5])
def test_stale_event_is_dropped_and_counted(lsn: int) -> None:
    hydrator = debezium_hydrator()
    state = inserted(hydrator)
    out = engine_step(hydrator, state, record("u", {"id": 1, "big": "old", "n": 0}, lsn=lsn), 0)
    assert out.emitted == () and out.state is state and out.counts == {"stale_dropped": 1}


def test_stale_event_can_be_forwarded_unchanged() -> None:
    hydrator = debezium_hydrator(HydrationSettings(on_stale=OnStale.FORWARD))
    stale = record("u", {"id": 1, "big": P, "n": 0}, lsn=5)
    out = engine_step(hydrator, inserted(hydrator), stale, 0)
    assert out.emitted[0].value is stale.value
    assert dict(out.emitted[0].headers)["hydrator.stale"] == b"true"


def test_late_event_cannot_resurrect_a_deleted_row() -> None:
    hydrator = debezium_hydrator()
    deleted = run(
        hydrator,
        record("d", None, before={"id": 1, "big": None, "n": None}, lsn=20),
        state=inserted(hydrator),
    ).state
    out = engine_step(hydrator, deleted, record("u", {"id": 1, "big": "x", "n": 3}, lsn=15), 0)
    assert out.state is deleted and out.counts == {"stale_dropped": 1}


UNRESOLVED = record("u", {"id": 1, "big": P, "n": 2}, lsn=20)


def test_unresolved_keep_leaves_the_marker_and_lists_the_column() -> None:
    out = engine_step(debezium_hydrator(), None, UNRESOLVED, 0)
    assert after_of(out)["big"] == P
    assert dict(out.emitted[0].headers)[HEADER_UNRESOLVED] == b"big"
    assert out.counts["unresolved_columns"] == 1
    assert "big" not in out.state.image  # an unknown value is never stored


def test_unresolved_null() -> None:
    out = engine_step(
        debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.NULL)), None, UNRESOLVED, 0
    )
    assert after_of(out)["big"] is None
    assert dict(out.emitted[0].headers)[HEADER_UNRESOLVED] == b"big"


def test_unresolved_drop() -> None:
    out = engine_step(
        debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.DROP)), None, UNRESOLVED, 0
    )
    assert out.emitted == () and out.counts["unresolved_dropped"] == 1
    assert out.state.image == {"id": 1, "n": 2}


def test_unresolved_dlq() -> None:
    out = engine_step(
        debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.DLQ)), None, UNRESOLVED, 0
    )
    assert out.emitted == ()
    assert out.dead[0].reason == "unresolved columns: big"


def test_unresolved_fail() -> None:
    with pytest.raises(UnresolvedColumnsError, match="raw:2:0: unresolved columns big"):
        engine_step(
            debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.FAIL)),
            None,
            UNRESOLVED,
            0,
        )


def test_custom_hex_placeholder() -> None:
    hydrator = debezium_hydrator(options=FormatOptions(placeholder="hex:" + b"??".hex()))
    state = inserted(hydrator)
    out = engine_step(hydrator, state, record("u", {"id": 1, "big": "??", "n": 2}, lsn=20), 0)
    assert after_of(out)["big"] == BIG


def test_keyless_record_is_hydrated_statelessly() -> None:
    hydrator = debezium_hydrator()
    keyless = RawRecord("raw", 0, 0, None, orjson.dumps({"op": "c", "after": {"a": P}}))
    assert hydrator.route(keyless) is None
    out = engine_step(hydrator, None, keyless, 0)
    assert dict(out.emitted[0].headers)[HEADER_UNRESOLVED] == b"a"


# -- key changes ---------------------------------------------------------------------------------

NEWKEY = (("__debezium.newkey", b'{"id":2}'),)
OLDKEY = (("__debezium.oldkey", b'{"id":1}'),)


def key_change(hydrator: Hydrator) -> tuple[Any, RawRecord]:
    delete = record("d", None, before={"id": 1, "big": None, "n": None}, lsn=30, headers=NEWKEY)
    create = record("c", {"id": 2, "big": P, "n": 1}, key=2, lsn=30, offset=1, headers=OLDKEY)
    return engine_step(hydrator, inserted(hydrator), delete, 0), create


def test_delete_with_newkey_emits_a_handoff_with_the_old_image() -> None:
    deleted, _ = key_change(debezium_hydrator())
    (handoff,) = deleted.handoffs
    assert (handoff.old_key, handoff.new_key) == ('{"id":1}', '{"id":2}')
    assert handoff.image == {"id": 1, "big": BIG, "n": 1}
    assert handoff.pos == (29, 30)
    assert handoff.route_key == b'{"id":2}'


def test_delete_of_an_unknown_key_still_hands_off() -> None:
    delete = record("d", None, before={"id": 1, "big": None}, lsn=30, headers=NEWKEY)
    (handoff,) = engine_step(debezium_hydrator(), None, delete, 0).handoffs
    assert handoff.image is None


def test_create_waits_for_its_handoff_with_later_events_behind_it() -> None:
    hydrator = debezium_hydrator()
    deleted, create = key_change(hydrator)
    parked = engine_step(hydrator, None, create, 100)
    assert parked.emitted == () and parked.state.is_parked
    update = record("u", {"id": 2, "big": P, "n": 5}, key=2, lsn=40, offset=2)
    parked = engine_step(hydrator, parked.state, update, 100)
    assert len(parked.state.parked) == 2
    released = hydrator.receive_handoff(parked.state, deleted.handoffs[0], 200)
    assert [after_of_output(o) for o in released.emitted] == [
        {"id": 2, "big": BIG, "n": 1},
        {"id": 2, "big": BIG, "n": 5},
    ]
    assert not released.state.is_waiting and released.state.waiting_since_ms is None


def after_of_output(output: Any) -> dict[str, Any]:
    return orjson.loads(output.value)["after"]


def test_handoff_arriving_first_waits_for_its_create() -> None:
    hydrator = debezium_hydrator()
    deleted, create = key_change(hydrator)
    waiting = hydrator.receive_handoff(None, deleted.handoffs[0], 0)
    assert [h.old_key for h in waiting.state.handoffs] == ['{"id":1}']
    out = engine_step(hydrator, waiting.state, create, 0)
    assert after_of(out) == {"id": 2, "big": BIG, "n": 1}
    assert not out.state.is_waiting


def test_redelivered_handoff_after_its_create_is_ignored() -> None:
    hydrator = debezium_hydrator()
    deleted, create = key_change(hydrator)
    done = engine_step(
        hydrator, hydrator.receive_handoff(None, deleted.handoffs[0], 0).state, create, 0
    )
    again = hydrator.receive_handoff(done.state, deleted.handoffs[0], 0)
    assert again.state is done.state and again.counts == {"handoffs_unneeded": 1}


def test_parked_records_are_emitted_unresolved_after_the_handoff_timeout() -> None:
    hydrator = debezium_hydrator(HydrationSettings(handoff_timeout_ms=1000))
    _, create = key_change(hydrator)
    parked = engine_step(hydrator, None, create, 100).state
    assert hydrator.next_deadline_ms(parked) == 1100
    assert hydrator.tick(parked, 1099).state is parked
    out = hydrator.tick(parked, 1100)
    assert dict(out.emitted[0].headers)[HEADER_UNRESOLVED] == b"big"
    assert out.counts["handoff_timeouts"] == 1 and not out.state.is_parked


def test_unclaimed_handoff_expires() -> None:
    hydrator = debezium_hydrator(HydrationSettings(handoff_timeout_ms=1000))
    deleted, _ = key_change(hydrator)
    waiting = hydrator.receive_handoff(None, deleted.handoffs[0], 0).state
    assert hydrator.tick(waiting, 1000).state is None


def test_tombstone_is_forgotten_after_retention() -> None:
    hydrator = debezium_hydrator(HydrationSettings(tombstone_retention_ms=500))
    deleted = engine_step(
        hydrator,
        inserted(hydrator),
        record("d", None, before={"id": 1, "big": None, "n": None}, lsn=20),
        1000,
    ).state
    assert hydrator.next_deadline_ms(deleted) == 1500
    assert hydrator.tick(deleted, 1499).state is deleted
    assert hydrator.tick(deleted, 1500).state is None


def test_state_ttl_evicts_idle_rows() -> None:
    hydrator = debezium_hydrator(HydrationSettings(state_ttl_ms=100))
    state = inserted(hydrator)
    assert hydrator.next_deadline_ms(state) == 100
    assert hydrator.tick(state, 100).state is None
    assert debezium_hydrator().next_deadline_ms(state) is None


def test_two_key_changes_into_one_key_match_handoffs_by_old_key() -> None:
    """13 -> 15, then 15 deleted, then 14 -> 15; the handoff from 14 arrives first."""
    hydrator = debezium_hydrator()

    def row(key: int, lsn: int) -> StateRecord:
        return engine_step(
            hydrator,
            None,
            record("c", {"id": key, "big": f"image of {key}", "n": key}, key=key, lsn=lsn),
            0,
        ).state

    def move(old: int, new: int, lsn: int, offset: int) -> tuple[Any, RawRecord]:
        delete = record(
            "d",
            None,
            key=old,
            before={"id": old, "big": None, "n": None},
            lsn=lsn,
            headers=(("__debezium.newkey", f'{{"id":{new}}}'.encode()),),
        )
        create = record(
            "c",
            {"id": new, "big": P, "n": old},
            key=new,
            lsn=lsn,
            offset=offset,
            headers=(("__debezium.oldkey", f'{{"id":{old}}}'.encode()),),
        )
        return engine_step(hydrator, row(old, lsn - 5), delete, 0), create

    first, create_from_13 = move(13, 15, 100, 1)
    second, create_from_14 = move(14, 15, 200, 3)
    delete_15 = record(
        "d", None, key=15, before={"id": 15, "big": None, "n": None}, lsn=150, offset=2
    )
    state = None
    for item in (create_from_13, delete_15, create_from_14):
        state = engine_step(hydrator, state, item, 0).state
    assert state.awaiting == '{"id":13}' and len(state.parked) == 3
    early = hydrator.receive_handoff(state, second.handoffs[0], 0)
    assert early.emitted == () and early.state.is_parked
    released = hydrator.receive_handoff(early.state, first.handoffs[0], 0)
    creates = [after_of_output(o) for o in released.emitted if orjson.loads(o.value)["op"] == "c"]
    assert creates == [
        {"id": 15, "big": "image of 13", "n": 13},
        {"id": 15, "big": "image of 14", "n": 14},
    ]
    assert not released.state.is_waiting


def test_one_old_key_handing_off_to_one_new_key_twice() -> None:
    """1 -> 2, 2 deleted, 1 re-inserted, 1 -> 2 again: each CREATE takes its own handoff,
    whatever the order, and a copy of the first arriving late (a killed transaction's, on a
    broker that leaves it visible) fills nothing."""
    hydrator = debezium_hydrator()

    def move(image: str, lsn: int) -> tuple[Any, RawRecord]:
        old = run(hydrator, record("c", {"id": 1, "big": image, "n": 1}, lsn=lsn - 5)).state
        delete = record(
            "d", None, before={"id": 1, "big": None, "n": None}, lsn=lsn, headers=NEWKEY
        )
        create = record(
            "c", {"id": 2, "big": P, "n": 1}, key=2, lsn=lsn, offset=lsn, headers=OLDKEY
        )
        return engine_step(hydrator, old, delete, 0).handoffs[0], create

    first, create_1 = move("first life", 100)
    second, create_2 = move("second life", 200)
    delete_2 = record("d", None, key=2, before={"id": 2, "big": None, "n": None}, lsn=150)

    def lives(state: StateRecord | None, *steps: RawRecord | Any) -> list[str]:
        got = []
        for step in steps:
            if isinstance(step, RawRecord):
                out = engine_step(hydrator, state, step, 0)
            else:
                out = hydrator.receive_handoff(state, step, 0)
            state = out.state
            created = [orjson.loads(o.value) for o in out.emitted]
            got += [c["after"]["big"] for c in created if c["op"] == "c"]
        assert state is not None and not state.is_waiting
        return got

    expected = ["first life", "second life"]
    # both handoffs (and a late copy) pending before either CREATE
    assert lives(None, first, second, first, create_1, delete_2, create_2) == expected
    # the late copy reaches the parked second CREATE before its own handoff
    assert lives(None, first, create_1, delete_2, create_2, first, second) == expected
    # the second handoff reaches the parked first CREATE before the first
    assert lives(None, create_1, second, first, delete_2, create_2) == expected
    # the late copy arrives after the right handoff, before the CREATE
    assert lives(None, first, create_1, delete_2, second, first, create_2) == expected


def test_a_record_read_again_is_not_parked_twice() -> None:
    """An engine whose restored state is ahead of its committed input offsets (a killed
    transaction's changelog left visible) reads records it has already parked: they must not be
    released twice. Tombstones, which carry no position, are the ones rule 4 cannot catch."""
    hydrator = debezium_hydrator()
    deleted, create = key_change(hydrator)
    tombstone = RawRecord("raw", 2, 5, b'{"id":2}', None, ())
    parked = run(hydrator, create, tombstone).state
    again = run(hydrator, create, tombstone, state=parked)
    assert again.state is parked and again.counts == {"redelivered_parked": 1}
    released = hydrator.receive_handoff(parked, deleted.handoffs[0], 0)
    assert [o.value is None for o in released.emitted] == [False, True]
