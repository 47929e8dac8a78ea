"""The hydration rules (docs/rules.md rules 1-4, 6, and rule 5's choice of handoff) as pure
functions over one key's state. They never change a value they are given (see state.record on
why the per-event values are not frozen dataclasses)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hydrator import exact
from hydrator.core.reselected import Reselected
from hydrator.core.settings import HydrationSettings, OnUnresolved
from hydrator.events import Absent, ChangeEvent, Image, Op, Patch, Position
from state.handoff import Handoff
from state.large import materialized
from state.record import StateRecord


@dataclass(slots=True)
class Hydration:
    patch: Patch
    filled: tuple[str, ...]
    unresolved: tuple[str, ...]
    state: StateRecord
    # Columns filled from a re-select (core/reselected.py): proven the row's at the event, or not.
    reselected: tuple[str, ...] = ()
    reselected_current: tuple[str, ...] = ()
    # Unresolved only in `before` (one taken from an image that does not know them, or a
    # key-only one with no image to complete it): the event may still ship them in `after`.
    unknown_before: tuple[str, ...] = ()

    def __init__(  # written out: see hydrator/core/records.py
        self,
        patch: Patch,
        filled: tuple[str, ...],
        unresolved: tuple[str, ...],
        state: StateRecord,
        reselected: tuple[str, ...] = (),
        reselected_current: tuple[str, ...] = (),
        unknown_before: tuple[str, ...] = (),
    ) -> None:
        self.patch = patch
        self.filled = filled
        self.unresolved = unresolved
        self.state = state
        self.reselected = reselected
        self.reselected_current = reselected_current
        self.unknown_before = unknown_before


def is_stale(state: StateRecord | None, position: Position | None) -> bool:
    """Rule 4: an event at or before the stored position is a redelivery or out of order."""
    return state is not None and not_after(position, state.pos)


def not_after(position: Position | None, reference: Position | None) -> bool:
    """`position` is known to be at or before `reference` (positions of different shapes, or
    a missing one, compare as unknown)."""
    return (
        position is not None
        and reference is not None
        and len(position) == len(reference)
        and position <= reference
    )


def before(position: Position | None, reference: Position | None) -> bool:
    """`position` is known to be strictly before `reference`."""
    return not_after(position, reference) and position != reference


def claim_handoff(state: StateRecord, old_key: str, position: Position | None) -> Handoff | None:
    """Rule 5: the pending handoff a CREATE at `position` from `old_key` takes. One old key can
    hand off to the same new key more than once (and a copy can arrive late), so it is the
    latest from that key that the key's state is not already past and that is not after the
    CREATE; among handoffs whose positions cannot be compared, the first to arrive."""
    chosen = None
    for handoff in state.handoffs:
        if (
            handoff.old_key != old_key
            or is_stale(state, handoff.pos)
            or before(position, handoff.pos)
        ):
            continue
        if chosen is None or before(chosen.pos, handoff.pos):
            chosen = handoff
    return chosen


def live_image(state: StateRecord | None) -> Image | None:
    return state.image if state is not None and not state.deleted else None


def is_key_only(before: Image, key_columns: frozenset[str]) -> bool:
    """Default replica identity ships deletes' `before` with only the key columns set."""
    return all(value is None for column, value in before.items() if column not in key_columns)


def fill(columns: tuple[str, ...], image: Image | None, into: dict[str, Any]) -> list[str]:
    """Rule 1: copy each missing column the image holds into `into`; return the unresolved ones."""
    unresolved = []
    for column in columns:
        if image is not None and column in image:
            into[column] = image[column]
        else:
            unresolved.append(column)
    return unresolved


def hydrate(
    state: StateRecord | None,
    event: ChangeEvent,
    settings: HydrationSettings,
    now_ms: int,
    image: Image | None,
    reselected: Reselected | None = None,
) -> Hydration:
    """Fill `event` from `image` (normally the state's live image; a handoff's for a key change)
    and compute the key's next state. Transient key-change fields of `state` are kept. Columns of
    `after` that `image` cannot fill are taken from `reselected` when it has them. A column the
    state does not know (StateRecord.unknown) that an output would take from the image is
    listed unresolved: the image lacks it."""
    patch = Patch(old_image=image)
    # The state's unknown columns go with its own image (`live_image` hands that very object);
    # a handoff's image comes with none.
    gaps = state.unknown if state is not None and image is not None and image is state.image else ()
    unresolved = fill(event.missing_after, image, patch.after)
    exact: tuple[str, ...] = ()
    current: tuple[str, ...] = ()
    if reselected is not None and unresolved:
        unresolved, exact, current = fill_reselected(unresolved, reselected, patch.after)
    unknown_after = tuple(unresolved)
    gaps_after: tuple[str, ...] = ()
    if event.absent is Absent.MISSING and event.op is not Op.DELETE and event.after is not None:
        fill_absent(event.after, image, patch.after)
        if gaps:
            gaps_after = tuple([column for column in gaps if column not in event.after])
    gaps_before: tuple[str, ...] = ()
    unknown_in_before: list[str] = []
    if event.op in (Op.UPDATE, Op.DELETE):
        unknown_in_before = _fill_before(event, image, settings, patch)
        if unknown_in_before:
            unresolved += unknown_in_before
        if gaps:
            gaps_before = _before_gaps(event, patch, gaps)
    if exact or current:  # re-selected columns are not `filled`
        taken = {*exact, *current}
        filled = tuple(dict.fromkeys([*(c for c in patch.after if c not in taken), *patch.before]))
    else:
        filled = (
            tuple(dict.fromkeys([*patch.after, *patch.before])) if patch.before else (*patch.after,)
        )
    listed = [*unresolved, *gaps_after, *gaps_before] if gaps else unresolved
    unresolved_columns = tuple(dict.fromkeys(listed)) if listed else ()
    if unresolved_columns and settings.on_unresolved is OnUnresolved.NULL:
        for column in dict.fromkeys(unresolved):
            if column in event.missing_after:
                patch.after[column] = None
            if patch.whole_before is not None:
                if column not in patch.whole_before:
                    patch.whole_before = {**patch.whole_before, column: None}
            elif column not in event.missing_after:
                patch.before[column] = None
        for column in gaps_after:
            patch.after[column] = None
        for column in gaps_before:
            if patch.whole_before is not None:
                patch.whole_before = {**patch.whole_before, column: None}
            else:
                patch.before[column] = None
    # A value that may be newer than the event is carried, never kept (core/reselected.py).
    unstored = (*unknown_after, *current) if current else unknown_after
    if gaps_after:  # (under `--on-unresolved null` patch.after holds them as None: not values)
        unstored = (*unstored, *gaps_after)
    next_state = _next_state(state, event, patch, image, unstored, gaps, now_ms)
    patch.new_image = next_state.image
    only_before: tuple[str, ...] = ()
    if gaps_before or unknown_in_before:
        only_before = tuple(
            dict.fromkeys(c for c in (*unknown_in_before, *gaps_before) if c not in unknown_after)
        )
    return Hydration(patch, filled, unresolved_columns, next_state, exact, current, only_before)


def fill_reselected(
    unresolved: list[str], reselected: Reselected, into: dict[str, Any]
) -> tuple[list[str], tuple[str, ...], tuple[str, ...]]:
    """Fill what the state could not from re-selected values: the columns still unresolved,
    and the re-selected ones, proven (exact) and not (current)."""
    left: list[str] = []
    exact: list[str] = []
    current: list[str] = []
    for column in unresolved:
        if column in reselected.values:
            into[column] = reselected.values[column]
            (exact if column in reselected.exact else current).append(column)
        else:
            left.append(column)
    return left, tuple(exact), tuple(current)


def fill_absent(event_image: Image, image: Image | None, into: dict[str, Any]) -> None:
    """A patch stream's rule 1: every column of the stored image that the event's image does
    not name was not shipped: copy it into `into`."""
    if image is not None:
        for column in image:  # not items(): a large value is read only when it is copied
            if column not in event_image:
                into[column] = image[column]


def _fill_before(
    event: ChangeEvent, image: Image | None, settings: HydrationSettings, patch: Patch
) -> list[str]:
    """Rule 2: fill missing columns of `before`; a null or key-only `before` becomes the image.
    Returns the columns of `before` left unknown: its unfilled placeholders, and the non-key
    columns of a key-only `before` with no image to make it whole (rule 6: its nulls are not the
    row's values). A null `before` claims nothing and lists nothing."""
    before = event.before
    if before is None or is_key_only(before, event.key_columns):
        if not settings.fill_before:
            return []  # `--no-fill-before`: `before` is the connector's, as it came
        if image is not None:
            # every value of it is rendered: read the large ones now (state/large.py)
            patch.whole_before = materialized(image)
            return []
        if before is None:
            return []
        keys = event.key_columns
        return [column for column in before if column not in keys]
    unresolved = fill(event.missing_before, image, patch.before)
    if event.absent is Absent.MISSING:
        fill_absent(before, image, patch.before)
    return unresolved


def _before_gaps(event: ChangeEvent, patch: Patch, gaps: tuple[str, ...]) -> tuple[str, ...]:
    """The columns of `gaps` (those the image does not know) that the `before` rule 2 made
    lacks: all of them in a `before` made of the image, except, for a full-row format, those
    the event no longer names (the table dropped them); in a patch stream's own `before`, those
    it does not name."""
    whole = patch.whole_before
    if whole is not None:
        named = event.before or event.after
        if named is None or event.absent is not Absent.DROPPED:
            return tuple([column for column in gaps if column not in whole])
        return tuple([column for column in gaps if column not in whole and column in named])
    before = event.before
    if (
        event.absent is Absent.MISSING
        and before is not None
        and not is_key_only(before, event.key_columns)
    ):
        return tuple([column for column in gaps if column not in before])
    return ()


def _next_state(
    state: StateRecord | None,
    event: ChangeEvent,
    patch: Patch,
    image: Image | None,
    unresolved: tuple[str, ...],
    gaps: tuple[str, ...],
    now_ms: int,
) -> StateRecord:
    """Rule 3: the new image is the filled `after`; a delete leaves a tombstone. Unresolved
    markers are not stored: the true value is unknown until an event ships it, so the new
    state names them unknown, with the columns `gaps` the image did not know that this event
    does not tell either."""
    base = state or StateRecord()
    pos = event.position if event.position is not None else base.pos
    if event.cell_times is not None:
        cells, times = merge_cells(base, event.after or {}, event.cell_times)
        still = tuple(column for column in gaps if column not in cells) if gaps else ()
        return base.with_row(cells, pos, False, now_ms, times, still)
    if event.op is Op.DELETE:
        return base.with_row(None, pos, deleted=True, updated_at_ms=now_ms)
    assert event.after is not None
    new_image = {**event.after, **patch.after}
    if event.absent is Absent.NULL and image is not None:
        for column in image:
            if column not in new_image:
                new_image[column] = None
    unknown = unresolved
    if gaps:
        unknown = (*unresolved, *_still_unknown(gaps, new_image, event.absent))
    for column in unknown:
        new_image.pop(column, None)
    return base.with_row(
        new_image, pos, False, now_ms, None, tuple(dict.fromkeys(unknown)) if unknown else ()
    )


def _still_unknown(gaps: tuple[str, ...], new_image: dict[str, Any], absent: Absent) -> list[str]:
    """Which of the columns the stored image did not know the new image does not know either:
    those the event neither shipped nor filled. A column the event does not name stays unknown
    in a patch stream (not shipped), is NULL where an absent column means that (set here), and
    is gone from a full-row format (the table dropped it)."""
    still = []
    for column in gaps:
        if column in new_image:
            continue
        if absent is Absent.MISSING:
            still.append(column)
        elif absent is Absent.NULL:
            new_image[column] = None
    return still


def merge_cells(
    state: StateRecord, written: Image, times: Mapping[str, int]
) -> tuple[dict[str, Any], dict[str, int]]:
    """Last write wins per cell: each written cell replaces the stored one when its write time
    is later; on equal times the larger value (canonical JSON) wins, so replicas delivering the
    same cells in any order agree."""
    cells = dict(state.image or {})
    cell_times = dict(state.cell_times or {})
    for column, time in times.items():
        value = written[column]
        stored = cell_times.get(column)
        if (
            stored is None
            or time > stored
            or (time == stored and _json(value) > _json(cells.get(column)))
        ):
            cells[column] = value
            cell_times[column] = time
    return cells, cell_times


def _json(value: Any) -> bytes:
    return exact.dumps(value, sort_keys=True)


def handoff_image(state: StateRecord | None, event: ChangeEvent) -> Image | None:
    """The full old image a deleted key passes to its new key: the state's, or a full `before`."""
    image = live_image(state)
    if image is not None:
        return image
    before = event.before
    if before and not event.missing_before and not is_key_only(before, event.key_columns):
        return before
    return None
