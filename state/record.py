"""The state kept per (input topic, canonical key) (docs/rules.md).

A StateRecord is a value: the rules make a new one (`with_row`, `dataclasses.replace`) and
never change one. It is not a `frozen` dataclass because one is made for every event and a
frozen constructor costs five times as much.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hydrator.events import RawRecord
from state.handoff import Handoff
from state.layout import state_key

__all__ = ["StateRecord", "state_key"]


@dataclass(slots=True)
class StateRecord:
    """`image` is the last full row (None before any image is known); `deleted` marks a tombstone.

    Key-change data is transient: `handoffs` hold old images that arrived before the CREATE that
    names their old key; `parked` holds this key's records, oldest first, while the first of them
    waits for the handoff from `awaiting` (its old key). Something has been waiting since
    `waiting_since_ms`.

    `cell_times` is kept for events that carry per-cell write times (ChangeEvent.cell_times):
    per column of `image`, the write time of the value it holds. None otherwise.

    `bootstrap` marks an image that `hydrator state bootstrap` wrote and no stream event has
    replaced yet: () when it came from a topic of full rows (`pos` is the row's), else the
    Postgres snapshot it was read in (hydrator.core.visibility). `with_row` clears it: the
    first event that applies makes the image the stream's.

    `unknown` names the columns of the row whose value the state does not know: an event that
    applied left them unresolved (or filled them only with a value that may be newer than
    itself), and such values are not stored, so `image` lacks them. A column the image lacks
    but `unknown` does not name is not the row's (a column added since: rule 1). Usually ().
    """

    image: Mapping[str, Any] | None = None  # a dict, or a LazyImage (state/large.py)
    pos: tuple[int, ...] | None = None
    deleted: bool = False
    updated_at_ms: int = 0
    handoffs: tuple[Handoff, ...] = field(default=())
    parked: tuple[RawRecord, ...] = field(default=())
    awaiting: str | None = None
    waiting_since_ms: int | None = None
    cell_times: dict[str, int] | None = None
    bootstrap: tuple[int, ...] | None = None
    unknown: tuple[str, ...] = ()

    def __init__(  # written out: see hydrator/core/records.py
        self,
        image: Mapping[str, Any] | None = None,
        pos: tuple[int, ...] | None = None,
        deleted: bool = False,
        updated_at_ms: int = 0,
        handoffs: tuple[Handoff, ...] = (),
        parked: tuple[RawRecord, ...] = (),
        awaiting: str | None = None,
        waiting_since_ms: int | None = None,
        cell_times: dict[str, int] | None = None,
        bootstrap: tuple[int, ...] | None = None,
        unknown: tuple[str, ...] = (),
    ) -> None:
        self.image = image
        self.pos = pos
        self.deleted = deleted
        self.updated_at_ms = updated_at_ms
        self.handoffs = handoffs
        self.parked = parked
        self.awaiting = awaiting
        self.waiting_since_ms = waiting_since_ms
        self.cell_times = cell_times
        self.bootstrap = bootstrap
        self.unknown = unknown

    def with_row(
        self,
        image: Mapping[str, Any] | None,
        pos: tuple[int, ...] | None,
        deleted: bool,
        updated_at_ms: int,
        cell_times: dict[str, int] | None = None,
        unknown: tuple[str, ...] = (),
    ) -> StateRecord:
        """This record with a new row (rule 3) whose `unknown` columns are those given, the
        key-change fields kept. Every event takes this path, where `dataclasses.replace` cost
        more than the rule itself."""
        return StateRecord(  # positional: keyword arguments cost a fifth more here
            image,
            pos,
            deleted,
            updated_at_ms,
            self.handoffs,
            self.parked,
            self.awaiting,
            self.waiting_since_ms,
            cell_times,
            None,
            unknown,
        )

    @property
    def is_parked(self) -> bool:
        return bool(self.parked)

    @property
    def is_waiting(self) -> bool:
        return bool(self.parked or self.handoffs)
