"""The state records a bootstrap writes, and how they meet the state already there. Pure.

* A row read from Postgres becomes an image with no position, marked with the snapshot it was
  read in; a topic of full rows is folded through the hydration rules themselves (a later row of
  a key fills what an earlier one left unresolved; a delete leaves a tombstone), each record
  keeping its position, marked `()`.
* `merged` never lets a bootstrap replace what the stream made: a key whose state came from
  the stream (or is waiting on a key change) is kept; a key bootstrapped before is replaced only
  when the new source says something else about it, so bootstrapping the same source again
  writes nothing.
* `with_reselected` is how the Spark engine's re-select reaches a key's state (its records share
  the bootstrap topic): the columns a re-select proved exact for an event join the key's state
  only while that event is the last one applied to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hydrator.core import rules
from hydrator.core.settings import HydrationSettings
from hydrator.core.visibility import SourceSnapshot
from hydrator.events import ChangeEvent
from state.large import LazyImage
from state.record import StateRecord

TOPIC_ROWS: tuple[int, ...] = ()


def snapshot_row(image: dict[str, Any], snapshot: SourceSnapshot, now_ms: int) -> StateRecord:
    """A row read in `snapshot`."""
    return StateRecord(image=image, updated_at_ms=now_ms, bootstrap=snapshot.to_mark())


def fold_full_row(state: StateRecord | None, event: ChangeEvent, now_ms: int) -> StateRecord | None:
    """`state` after one event of a topic of full rows (an event at or before the state's
    position changes nothing)."""
    if rules.is_stale(state, event.position):
        return state
    settings = HydrationSettings()
    hydration = rules.hydrate(state, event, settings, now_ms, rules.live_image(state))
    folded = hydration.state
    folded.bootstrap = TOPIC_ROWS
    folded.handoffs, folded.parked, folded.awaiting, folded.waiting_since_ms = (), (), None, None
    return folded


def merged(existing: StateRecord | None, incoming: StateRecord) -> StateRecord | None:
    """What a bootstrap writes for a key whose stored state is `existing`; None: keep it."""
    if existing is None:
        return incoming
    if existing.bootstrap is None or existing.is_waiting:
        return None  # the stream's, or a key change in flight: later than any bootstrap
    if type(existing.image) is not dict and existing.image is not None:
        return None  # rewritten by a run (large values out of line): the run's now
    if existing.bootstrap == TOPIC_ROWS and incoming.bootstrap == TOPIC_ROWS:
        if rules.not_after(incoming.pos, existing.pos):
            return None
        return incoming
    same = (
        existing.image == incoming.image
        and existing.deleted == incoming.deleted
        and existing.pos == incoming.pos
    )
    return None if same else incoming


def with_reselected(existing: StateRecord | None, reselected: StateRecord) -> StateRecord | None:
    """`existing` with the columns of `reselected` (the state a re-select made for the event at
    its position: the stream's image there plus the columns read exact) that its image lacks;
    None: keep it. Only a state still at that event's position takes them: any later event
    made its own image, and a current (possibly newer) value is never in `reselected`."""
    if (
        existing is None
        or existing.deleted
        or existing.image is None
        or reselected.image is None
        or existing.pos is None
        or existing.pos != reselected.pos
    ):
        return None
    image = existing.image
    added = {c: reselected.image[c] for c in reselected.image if c not in image}
    if not added:
        return None
    known = tuple(column for column in existing.unknown if column not in added)
    return replace(existing, image=_joined(image, added), unknown=known)


def _joined(image: Mapping[str, Any], added: dict[str, Any]) -> Mapping[str, Any]:
    """`image` and the `added` columns, a large value of `image` left unread."""
    if type(image) is LazyImage:
        return LazyImage({**image.cells, **added}, image.reader)
    return {**image, **added}
