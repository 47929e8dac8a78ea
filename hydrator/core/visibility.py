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

A Postgres bootstrap also marks the table (`TableMark`, kept per input topic, not per key): the
snapshot and the write-ahead log's position when it was taken. A row deleted or re-keyed before
the snapshot is not in it, so no image carries the snapshot for its key; the table's mark places
that key's events all the same (`table_contains`). The log position bounds the mark: an event
whose position (Postgres: `source.sequence`, LSNs) has a part past it was written after the
snapshot was taken, so its transaction committed after it, whatever its 32-bit id says. That
keeps the mark true for good, also once transaction ids have gone round (2^31 transactions
later a widened id would otherwise land in the snapshot's past).
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
    log_position: int | None = None,
) -> bool:
    """Whether a row image bootstrapped under `mark` already holds an event's change.

    `mark` is the state record's `bootstrap` field: () for a topic of full rows (the image's
    `image_position` decides; an event whose position cannot be compared with it applies), else
    a Postgres snapshot (SourceSnapshot.to_mark). An event without a transaction id cannot be
    placed against a snapshot: it counts as contained, so it is never filled with a value that
    may be later than it. `log_position`: the snapshot's log position, when known (the mark
    is its table's, TableMark): an event past it is not contained.
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
    if log_position is not None and _past(event_position, log_position):
        return False
    return visible(SourceSnapshot.from_mark(mark), event_tx)


# A table's bootstrap mark: (log position, xmin, xmax, *xip), the snapshot as in `to_mark` after
# the write-ahead log's position read in the same transaction, just after the snapshot.
TableMark = tuple[int, ...]


def table_mark(snapshot: SourceSnapshot, log_position: int) -> TableMark:
    return (log_position, *snapshot.to_mark())


def same_snapshot(table: TableMark, mark: tuple[int, ...]) -> bool:
    """Whether an image's `mark` is the snapshot of the table mark `table`."""
    return table[1:] == mark


def table_contains(table: TableMark, event_tx: int | None, event_position: Position | None) -> bool:
    """Whether the table's bootstrap snapshot already holds an event of a key the snapshot had
    no row for: its transaction is visible in the snapshot, and its position is not past the
    snapshot's log position. An event that cannot be placed (no transaction id, no position) is
    not: with no image for its key, nothing would be filled from a later one anyway."""
    if event_tx is None or event_position is None or _past(event_position, table[0]):
        return False
    return visible(SourceSnapshot.from_mark(table[1:]), event_tx)


def _past(position: Position | None, log_position: int) -> bool:
    """Some part of `position` is past `log_position` (each part of a Postgres position is an
    LSN: the last commit's and the change's)."""
    return position is not None and any(part > log_position for part in position)
