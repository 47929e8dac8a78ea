"""What a codec can tell the rules per event, checked on the pure rules with hand-made events:
absent columns (patch streams, replaces), per-cell write times (last write wins per cell), and
the whole images a Patch hands back for a codec to render."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from hydrator.core import HydrationSettings
from hydrator.core.rules import hydrate
from hydrator.events import Absent, ChangeEvent, Op
from state.record import StateRecord

SETTINGS = HydrationSettings()
STORED = {"id": 1, "a": "A", "b": "B", "c": "C"}


def stored(image: dict[str, Any] | None = STORED) -> StateRecord:
    return StateRecord(image=dict(image) if image is not None else None, updated_at_ms=1)


def run(event: ChangeEvent, state: StateRecord | None = None) -> Any:
    state = stored() if state is None else state
    return hydrate(state, event, SETTINGS, 5, state.image)


# -- absent columns ---------------------------------------------------------------------------


def test_absent_columns_of_a_patch_are_filled_in_after_and_stored() -> None:
    event = ChangeEvent(Op.UPDATE, None, {"id": 1, "a": "A2"}, absent=Absent.MISSING)
    out = run(event)
    assert out.patch.after == {"b": "B", "c": "C"}
    assert out.filled == ("b", "c") and out.unresolved == ()
    assert out.state.image == {"id": 1, "a": "A2", "b": "B", "c": "C"}
    assert out.patch.whole_before == STORED  # a null `before` is still the stored image


def test_absent_columns_of_a_partial_before_are_filled() -> None:
    before = {"id": 1, "a": "A"}  # not key-only: it carries a column besides the key
    event = ChangeEvent(
        Op.UPDATE,
        before,
        {"id": 1, "a": "A2"},
        key_columns=frozenset({"id"}),
        absent=Absent.MISSING,
    )
    out = run(event)
    assert out.patch.before == {"b": "B", "c": "C"} and out.patch.whole_before is None
    assert out.filled == ("b", "c")


def test_a_patch_delete_fills_before_and_leaves_a_tombstone() -> None:
    before = {"id": 1, "b": "B"}
    event = ChangeEvent(Op.DELETE, before, None, absent=Absent.MISSING)
    out = run(event)
    assert out.patch.before == {"a": "A", "c": "C"} and out.patch.after == {}
    assert out.state.deleted and out.state.image is None and out.patch.new_image is None


def test_placeholders_and_absent_columns_fill_together() -> None:
    event = ChangeEvent(
        Op.UPDATE, None, {"id": 1, "a": "P"}, missing_after=("a",), absent=Absent.MISSING
    )
    out = run(event)
    assert out.patch.after == {"a": "A", "b": "B", "c": "C"}
    assert out.state.image == STORED


def test_absent_columns_of_a_full_row_format_are_dropped() -> None:
    out = run(ChangeEvent(Op.UPDATE, None, {"id": 1, "a": "A2"}))
    assert out.patch.after == {} and out.filled == ()
    assert out.state.image == {"id": 1, "a": "A2"}


def test_absent_columns_of_a_replace_become_null() -> None:
    out = run(ChangeEvent(Op.UPDATE, None, {"a": "A2"}, absent=Absent.NULL))
    assert out.patch.after == {} and out.filled == ()
    assert out.state.image == {"a": "A2", "id": None, "b": None, "c": None}
    assert out.patch.new_image == out.state.image


def test_absent_columns_without_a_stored_row_are_nothing() -> None:
    event = ChangeEvent(Op.UPDATE, None, {"id": 1, "a": "A2"}, absent=Absent.MISSING)
    out = run(event, stored(None))
    assert out.patch.after == {} and out.unresolved == ()
    assert out.state.image == {"id": 1, "a": "A2"}


# -- whole images for the codec ---------------------------------------------------------------


def test_the_patch_carries_the_old_and_new_rows() -> None:
    out = run(ChangeEvent(Op.UPDATE, None, {"id": 1, "a": "P", "b": "B2"}, missing_after=("a",)))
    assert out.patch.old_image == STORED
    assert out.patch.new_image == {"id": 1, "a": "A", "b": "B2"} == out.state.image
    created = run(ChangeEvent(Op.CREATE, None, {"id": 1}), stored(None))
    assert created.patch.old_image is None and created.patch.new_image == {"id": 1}


def test_an_empty_patch_is_false_even_with_images() -> None:
    out = run(ChangeEvent(Op.CREATE, None, {"id": 1}), stored(None))
    assert not out.patch and out.patch.new_image == {"id": 1}


# -- per-cell write times -----------------------------------------------------------------------


def cells(op: Op, written: dict[str, Any], time: int, missing: tuple[str, ...] = ()) -> ChangeEvent:
    after = {**written, **dict.fromkeys(missing)}
    return ChangeEvent(
        op, None, after, missing_after=missing, cell_times=dict.fromkeys(written, time)
    )


def test_a_later_cell_wins_and_an_earlier_one_does_not() -> None:
    first = run(cells(Op.CREATE, {"a": 1, "b": 1}, 10), stored(None)).state
    assert first.cell_times == {"a": 10, "b": 10}
    older = run(cells(Op.UPDATE, {"a": 0, "b": 5}, 5), first).state
    assert older.image == {"a": 1, "b": 1}  # an out-of-order write loses, cell by cell
    newer = run(cells(Op.UPDATE, {"b": 2}, 20, missing=("a",)), older)
    assert newer.state.image == {"a": 1, "b": 2} and newer.state.cell_times == {"a": 10, "b": 20}
    assert newer.patch.after == {"a": 1} and newer.filled == ("a",)


def test_a_delete_under_cell_times_is_a_write_not_a_tombstone() -> None:
    first = run(cells(Op.CREATE, {"a": 1}, 10), stored(None)).state
    deleted = run(cells(Op.DELETE, {"a": None}, 20), first).state
    assert not deleted.deleted and deleted.image == {"a": None}
    stale_insert = run(cells(Op.CREATE, {"a": 1}, 15), deleted).state
    assert stale_insert.image == {"a": None}  # the older write cannot resurrect the cell


WRITES = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from("abc"), st.integers(0, 3), min_size=1),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=8,
)


@given(WRITES, st.randoms(use_true_random=False))
def test_last_write_wins_per_cell_in_any_arrival_order(
    writes: list[tuple[dict[str, int], int]], random: Any
) -> None:
    arrivals = writes + writes[: len(writes) // 2]  # replicas deliver some twice
    random.shuffle(arrivals)
    state: StateRecord | None = None
    for written, time in arrivals:
        state = hydrate(state, cells(Op.UPDATE, written, time), SETTINGS, 0, None).state
    assert state is not None
    expected: dict[str, tuple[int, bytes, int]] = {}
    for written, time in writes:
        for column, value in written.items():
            candidate = (time, orjson.dumps(value), value)
            expected[column] = max(expected.get(column, candidate), candidate)
    assert state.image == {c: v for c, (_, _, v) in expected.items()}
    assert state.cell_times == {c: t for c, (t, _, _) in expected.items()}
