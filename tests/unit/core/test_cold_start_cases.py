"""The cases a live deployment meets first (docs/cold-start.md), as rules of the core:

* a key whose first event is a primary-key change, its old key without state: the handoff
  carries no image, and a re-select of what it releases fills the new key (and seeds it);
* a bootstrap taken while writers run: the table's snapshot places the events of keys it had no
  row for (a row deleted or re-keyed before it), and its log position bounds it;
* a key-only `before` with no image to complete it is never passed off as the row.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from hydrator.core import HydrationSettings, Hydrator, OnUnresolved, RawRecord
from hydrator.core.changes import HEADER_CHANGED
from hydrator.core.records import HEADER_FILLED, HEADER_UNRESOLVED
from hydrator.core.reselected import HEADER_RESELECTED, HEADER_RESELECTED_CURRENT, Reselected
from hydrator.core.visibility import SourceSnapshot, contains, table_contains, table_mark
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.reselect.misses import MissFinder
from hydrator.seeding.snapshots import decode_mark, encode_mark
from state.handoff import Handoff
from state.record import StateRecord
from tests.support.core import debezium_hydrator, engine_step

P = "__debezium_unavailable_value"
OLD, NEW = b'{"id":1}', b'{"id":2}'
TOPIC = "t"


def event(
    op: str,
    key: bytes,
    after: dict[str, Any] | None,
    before: dict[str, Any] | None,
    tx: int,
    lsn: int,
    headers: tuple[tuple[str, bytes], ...] = (),
    offset: int | None = None,
) -> RawRecord:
    source = {
        "connector": "postgresql",
        "schema": "public",
        "table": "t",
        "txId": tx,
        "lsn": lsn,
        "sequence": f'["{lsn - 1}","{lsn}"]',
    }
    value = {"op": op, "before": before, "after": after, "source": source, "ts_ms": 1}
    return RawRecord(TOPIC, 0, lsn if offset is None else offset, key, orjson.dumps(value), headers)


def key_change(tx: int, lsn: int, after: dict[str, Any]) -> tuple[RawRecord, RawRecord]:
    """DELETE(old key, key-only before) and CREATE(new key, `after`), as Debezium ships a
    primary-key change under the default replica identity."""
    delete = event("d", OLD, None, {"id": 1, "doc": None, "n": None}, tx, lsn,
                   (("__debezium.newkey", NEW),))  # fmt: skip
    create = event("c", NEW, after, None, tx, lsn, (("__debezium.oldkey", OLD),), lsn + 1)
    return delete, create


def headers_of(out: Any) -> dict[str, str]:
    return {name: (value or b"").decode() for name, value in out.headers}


def payload(out: Any) -> dict[str, Any]:
    return orjson.loads(out.value)


# -- a key-only `before` with no image ---------------------------------------------------------


def test_a_key_only_before_without_an_image_lists_its_columns() -> None:
    delete = event("d", OLD, None, {"id": 1, "doc": None, "n": None}, 5, 10)
    step = engine_step(debezium_hydrator(), None, delete, 0)
    (out,) = step.emitted
    assert headers_of(out)[HEADER_UNRESOLVED] == "doc,n"
    assert payload(out)["before"] == {"id": 1, "doc": None, "n": None}
    assert step.counts["unresolved_columns"] == 2
    assert step.state is not None and step.state.deleted


def test_on_unresolved_applies_to_it_as_to_a_placeholder() -> None:
    delete = event("d", OLD, None, {"id": 1, "doc": None, "n": None}, 5, 10)
    nulls = debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.NULL))
    (out,) = engine_step(nulls, None, delete, 0).emitted
    assert headers_of(out)[HEADER_UNRESOLVED] == "doc,n"
    assert payload(out)["before"] == {"id": 1, "doc": None, "n": None}
    dropped = engine_step(
        debezium_hydrator(HydrationSettings(on_unresolved=OnUnresolved.DROP)), None, delete, 0
    )
    assert dropped.emitted == () and dropped.counts["unresolved_dropped"] == 1
    assert dropped.state is not None and dropped.state.deleted  # the tombstone all the same


@pytest.mark.parametrize(
    ("before", "settings"),
    [
        (None, HydrationSettings()),  # a null `before` claims nothing
        ({"id": 1, "doc": None, "n": None}, HydrationSettings(fill_before=False)),
        ({"id": 1}, HydrationSettings()),  # a table of key columns only: it is the row
    ],
    ids=["null-before", "no-fill-before", "key-columns-only"],
)
def test_what_is_not_listed(before: dict[str, Any] | None, settings: HydrationSettings) -> None:
    update = event("u", OLD, {"id": 1, "doc": "D", "n": 1}, before, 5, 10)
    (out,) = engine_step(debezium_hydrator(settings), None, update, 0).emitted
    assert HEADER_UNRESOLVED not in headers_of(out)


def test_an_update_with_a_key_only_before_still_says_what_changed() -> None:
    """The columns `after` ships are known: the `before` that lacks them does not hide them."""
    update = event("u", OLD, {"id": 1, "doc": "D", "n": 1}, {"id": 1, "doc": None, "n": None}, 5, 9)
    (out,) = engine_step(debezium_hydrator(), None, update, 0).emitted
    headers = headers_of(out)
    assert headers[HEADER_UNRESOLVED] == "doc,n"
    assert headers[HEADER_CHANGED] == "id,doc,n"


# -- a key change as a key's first event -------------------------------------------------------


def _through(
    hydrator: Hydrator,
    records: list[RawRecord],
    reselected: dict[str, Reselected] | None = None,
    handoff_late: bool = False,
) -> tuple[dict[str, StateRecord | None], list[Any]]:
    """The records through the core, each handoff applied to its new key at once, or (with
    `handoff_late`) after every record, so the CREATE parks first."""
    states: dict[str, StateRecord | None] = {}
    outputs: list[Any] = []
    waiting: list[Handoff] = []

    def deliver(handoff: Handoff) -> None:
        step = hydrator.receive_handoff(states.get(handoff.new_key), handoff, 0, reselected)
        states[handoff.new_key] = step.state
        outputs.extend(step.emitted)

    for record in records:
        key = hydrator.route(record)
        assert isinstance(key, str)
        given = (reselected or {}).get(record.source)
        step = hydrator.process(states.get(key), record, key, 0, given)
        states[key] = step.state
        outputs.extend(step.emitted)
        for handoff in step.handoffs:
            waiting.append(handoff) if handoff_late else deliver(handoff)
    for handoff in waiting:
        deliver(handoff)
    return states, outputs


@pytest.mark.parametrize("handoff_late", [False, True], ids=["handoff-first", "create-first"])
def test_without_reselect_a_key_change_from_nowhere_is_listed_unresolved(
    handoff_late: bool,
) -> None:
    delete, create = key_change(7, 20, {"id": 2, "doc": P, "n": 1})
    update = event("u", NEW, {"id": 2, "doc": P, "n": 2}, None, 8, 30)
    records = [create, delete, update] if handoff_late else [delete, create, update]
    states, outs = _through(debezium_hydrator(), records, handoff_late=handoff_late)
    by_source = {o.headers[-1][1].decode(): o for o in outs}
    assert headers_of(by_source[delete.source])[HEADER_UNRESOLVED] == "doc,n"
    assert headers_of(by_source[create.source])[HEADER_UNRESOLVED] == "doc"
    later = headers_of(by_source[update.source])
    assert later[HEADER_UNRESOLVED] == "doc"  # still not known: in `after` and in `before`
    assert payload(by_source[update.source])["before"] == {"id": 2, "n": 1}
    new = states['{"id":2}']
    assert new is not None and new.unknown == ("doc",) and not new.is_waiting


@pytest.mark.parametrize("handoff_late", [False, True], ids=["handoff-first", "create-first"])
def test_a_reselect_of_what_an_empty_handoff_releases_fills_and_seeds_the_new_key(
    handoff_late: bool,
) -> None:
    delete, create = key_change(7, 20, {"id": 2, "doc": P, "n": 1})
    behind = event("u", NEW, {"id": 2, "doc": P, "n": 2}, None, 8, 30)
    records = [create, behind, delete] if handoff_late else [delete, create, behind]
    reselected = {create.source: Reselected({"doc": "D"}, frozenset({"doc"}))}
    states, outs = _through(debezium_hydrator(), records, reselected, handoff_late)
    by_source = {o.headers[-1][1].decode(): o for o in outs}
    created = headers_of(by_source[create.source])
    assert created[HEADER_RESELECTED] == "doc" and HEADER_UNRESOLVED not in created
    assert payload(by_source[create.source])["after"] == {"id": 2, "doc": "D", "n": 1}
    # what came behind it is filled from the state the exact value seeded
    later = headers_of(by_source[behind.source])
    assert later[HEADER_FILLED] == "doc" and HEADER_UNRESOLVED not in later
    assert payload(by_source[behind.source])["before"] == {"id": 2, "doc": "D", "n": 1}
    new = states['{"id":2}']
    assert new is not None and new.image == {"id": 2, "doc": "D", "n": 2} and new.unknown == ()
    # the order of the new key's outputs is the order of its records
    new_key = [o.headers[-1][1].decode() for o in outs if o.key == NEW]
    assert new_key == [create.source, behind.source]


def test_a_current_value_fills_the_release_but_is_not_kept() -> None:
    delete, create = key_change(7, 20, {"id": 2, "doc": P, "n": 1})
    reselected = {create.source: Reselected({"doc": "newer"}, frozenset())}
    states, outs = _through(debezium_hydrator(), [create, delete], reselected, True)
    (created,) = [o for o in outs if o.key == NEW]
    assert headers_of(created)[HEADER_RESELECTED_CURRENT] == "doc"
    new = states['{"id":2}']
    assert new is not None and new.unknown == ("doc",)


def test_the_miss_finder_finds_what_an_empty_handoff_releases() -> None:
    hydrator = debezium_hydrator()
    finder = MissFinder(hydrator, PlaceholderForms(P.encode()))
    delete, create = key_change(7, 20, {"id": 2, "doc": P, "n": 1})
    behind = event("u", NEW, {"id": 2, "doc": P, "n": 2}, None, 8, 30)
    parked = hydrator.process(None, create, '{"id":2}', 0).state
    parked = hydrator.process(parked, behind, '{"id":2}', 0).state
    assert parked is not None and len(parked.parked) == 2
    (handoff,) = hydrator.process(None, delete, '{"id":1}', 0).handoffs
    assert handoff.image is None
    step, misses = finder.find_released(parked, handoff, 0)
    assert [m.source for m in misses] == [create.source, behind.source]
    assert [dict(m.shipped) for m in misses] == [{"doc": P}, {"doc": P}]
    assert misses[0].key == (2,) and misses[0].tx_id == 7 and misses[0].table == "t"
    assert len(step.emitted) == 2
    # a handoff that carries the old image fills them: nothing to re-select
    full = Handoff(TOPIC, '{"id":2}', '{"id":1}', {"id": 1, "doc": "D", "n": 0}, (19, 20), "x")
    _, none = finder.find_released(parked, full, 0)
    assert none == []


# -- the table's bootstrap snapshot ------------------------------------------------------------

SNAPSHOT = SourceSnapshot.parse("100:110:103")
LOG = 5000
MARK = table_mark(SNAPSHOT, LOG)


def marked(**settings: Any) -> Hydrator:
    return debezium_hydrator(HydrationSettings(table_snapshots=((TOPIC, MARK),), **settings))


def test_table_contains() -> None:
    assert table_contains(MARK, 101, (LOG - 1, LOG))
    assert not table_contains(MARK, 103, (LOG - 1, LOG))  # in progress at the snapshot
    assert not table_contains(MARK, 120, (LOG - 1, LOG))  # began after it
    assert not table_contains(MARK, None, (1, 2))  # cannot be placed: not claimed
    assert not table_contains(MARK, 101, None)
    # written past the snapshot's log position: after it, whatever the id says (2^32 later,
    # a 32-bit id 101 would otherwise be taken for the snapshot's)
    assert not table_contains(MARK, 101, (LOG - 1, LOG + 1))
    assert not table_contains(MARK, 101, (LOG + 1,))
    # an image of the same snapshot takes the same bound
    assert contains(SNAPSHOT.to_mark(), None, 101, (LOG + 1, LOG + 2))
    assert not contains(SNAPSHOT.to_mark(), None, 101, (LOG + 1, LOG + 2), LOG)


def test_the_mark_round_trips_through_its_record() -> None:
    value = encode_mark("public.t", SNAPSHOT, LOG)
    assert decode_mark(value) == MARK
    with pytest.raises(ValueError):
        decode_mark(b'{"version": 2}')
    with pytest.raises(ValueError):
        decode_mark(orjson.dumps({"version": 1, "snapshot": "1:2:", "log_position": "x"}))


def test_a_row_deleted_before_the_snapshot_is_marked_stale() -> None:
    """No image for the key (the snapshot did not hold the row): its events the snapshot
    already holds come out marked, and leave no state behind."""
    hydrator = marked()
    update = event("u", OLD, {"id": 1, "doc": P, "n": 5}, None, 101, 40)
    delete = event("d", OLD, None, {"id": 1, "doc": None, "n": None}, 102, 41)
    for record in (update, delete):
        step = engine_step(hydrator, None, record, 0)
        (out,) = step.emitted
        assert headers_of(out)["hydrator.stale"] == "bootstrap"
        assert step.state is None and step.counts["bootstrap_older_events"] == 1
    assert headers_of(engine_step(hydrator, None, delete, 0).emitted[0])[HEADER_UNRESOLVED]


def test_a_row_re_keyed_before_the_snapshot_is_marked_stale_and_nothing_waits() -> None:
    hydrator = marked()
    delete, create = key_change(101, 40, {"id": 2, "doc": P, "n": 1})
    step = engine_step(hydrator, None, delete, 0)
    (handoff,) = step.handoffs
    assert handoff.image is None
    assert headers_of(step.emitted[0])["hydrator.stale"] == "bootstrap"
    created = engine_step(hydrator, None, create, 0)  # before its handoff: it does not park
    assert headers_of(created.emitted[0])["hydrator.stale"] == "bootstrap"
    assert created.state is None and not created.counts.get("parked")


def test_events_after_the_snapshot_and_other_keys_go_on_as_ever() -> None:
    hydrator = marked()
    after = event("u", OLD, {"id": 1, "doc": "D", "n": 5}, None, 120, 6000)
    step = engine_step(hydrator, None, after, 0)
    assert "hydrator.stale" not in headers_of(step.emitted[0])
    # a 32-bit id that reads as the snapshot's, written past its log position
    wrapped = event("u", OLD, {"id": 1, "doc": "D", "n": 5}, None, 101, LOG + 10)
    assert "hydrator.stale" not in headers_of(engine_step(hydrator, None, wrapped, 0).emitted[0])
    # a key whose state is the stream's: the snapshot says nothing of it
    stream = StateRecord(image={"id": 1, "doc": "D", "n": 4}, pos=(30, 31))
    visible = event("u", OLD, {"id": 1, "doc": P, "n": 5}, None, 101, 40)
    step = engine_step(hydrator, stream, visible, 0)
    assert headers_of(step.emitted[0])[HEADER_FILLED] == "doc"
    # another input topic: no mark
    other = RawRecord("other", 0, 1, OLD, visible.value)
    assert "hydrator.stale" not in headers_of(engine_step(hydrator, None, other, 0).emitted[0])


def test_an_image_of_the_table_s_snapshot_takes_its_log_position() -> None:
    hydrator = marked()
    image = StateRecord(image={"id": 1, "doc": "D", "n": 4}, bootstrap=SNAPSHOT.to_mark())
    wrapped = event("u", OLD, {"id": 1, "doc": P, "n": 5}, None, 101, LOG + 10)
    (out,) = engine_step(hydrator, image, wrapped, 0).emitted
    assert headers_of(out)[HEADER_FILLED] == "doc"
    # without the table's mark, the id alone decides (contained)
    (out,) = engine_step(debezium_hydrator(), image, wrapped, 0).emitted
    assert headers_of(out)["hydrator.stale"] == "bootstrap"
