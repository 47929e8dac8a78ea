"""Which stream events a bootstrapped row image already contains (docs/cold-start.md).

A state bootstrap reads each row in a source snapshot, or from a topic of full rows. A stream
event the image already contains must not be filled from it (the image is newer than the event);
every event after it is filled exactly. Pure functions, no I/O.

Postgres: the bootstrap records `pg_current_snapshot()` of its REPEATABLE READ transaction
(`xmin:xmax:xip,...`, 64-bit `xid8` values). A transaction is visible in it exactly as
`pg_visible_in_snapshot` says: below `xmin`, or below `xmax` and not in the in-progress list.
Visible means committed before the snapshot, so the row read holds its writes. An event of a
transaction that is not visible committed after the snapshot and applies. Per row the verdicts
come in stream order: writers of one row are serialised by its row lock, so every visible writer
of a row committed, and was decoded, before any invisible one.

Debezium's `source.txId` is the transaction's 32-bit xid (pgoutput's BEGIN message), `xid8`
adds the epoch. Postgres keeps every live xid within 2^31 of every other, so the 32-bit id is
widened to the `xid8` nearest the snapshot with the same low 32 bits.

A topic of full rows carries each row's position: an event at or before it is contained.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydrator.errors import HydratorError
from hydrator.events import Position

_EPOCH = 1 << 32
_HALF = 1 << 31


class SnapshotFormatError(HydratorError, ValueError):
    """Not a `pg_current_snapshot()` text."""


@dataclass(frozen=True, slots=True)
class SourceSnapshot:
    """A Postgres snapshot: `xmin`, `xmax` and the in-progress `xip` (all `xid8`)."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> SourceSnapshot:
        """From `pg_current_snapshot()::text`, e.g. `740:745:740,742`."""
        try:
            xmin_text, xmax_text, xip_text = text.strip().split(":")
            xmin, xmax = int(xmin_text), int(xmax_text)
            xip = frozenset(int(x) for x in xip_text.split(",") if x)
        except ValueError:
            raise SnapshotFormatError(f"not a Postgres snapshot: {text[:100]!r}") from None
        snapshot = cls(xmin, xmax, xip)
        if not 0 < xmin <= xmax or any(not xmin <= x < xmax for x in xip):
            raise SnapshotFormatError(f"not a Postgres snapshot: {text[:100]!r}")
        return snapshot

    def to_mark(self) -> tuple[int, ...]:
        """The state record's `bootstrap` field: (xmin, xmax, *xip sorted)."""
        return (self.xmin, self.xmax, *sorted(self.xip))

    @classmethod
    def from_mark(cls, mark: tuple[int, ...]) -> SourceSnapshot:
        xmin, xmax, *xip = mark
        return cls(xmin, xmax, frozenset(xip))

    def __str__(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(map(str, sorted(self.xip)))}"


def widen_xid(xid: int, reference: int) -> int:
    """The `xid8` with the low 32 bits of `xid` nearest to `reference` (an `xid8`). An id that
    is already wider than 32 bits is taken as it is."""
    if xid >= _EPOCH:
        return xid
    candidate = (reference - reference % _EPOCH) + xid
    if candidate - reference > _HALF and candidate >= _EPOCH:
        candidate -= _EPOCH
    elif reference - candidate >= _HALF:
        candidate += _EPOCH
    return candidate


def visible(snapshot: SourceSnapshot, xid: int) -> bool:
    """`pg_visible_in_snapshot(xid, snapshot)` for a (possibly 32-bit) transaction id."""
    full = widen_xid(xid, snapshot.xmax)
    if full < snapshot.xmin:
        return True
    return full < snapshot.xmax and full not in snapshot.xip


def contains(
    mark: tuple[int, ...],
    image_position: Position | None,
    event_tx: int | None,
    event_position: Position | None,
) -> bool:
    """Whether a row image bootstrapped under `mark` already holds an event's change.

    `mark` is the state record's `bootstrap` field: () for a topic of full rows (the image's
    `image_position` decides; an event whose position cannot be compared with it applies), else
    a Postgres snapshot (SourceSnapshot.to_mark). An event without a transaction id cannot be
    placed against a snapshot: it counts as contained, so it is never filled with a value that
    may be later than it.
    """
    if not mark:
        return (
            event_position is not None
            and image_position is not None
            and len(event_position) == len(image_position)
            and event_position <= image_position
        )
    if event_tx is None:
        return True
    return visible(SourceSnapshot.from_mark(mark), event_tx)
