"""Re-selected column values, and how honest they are (docs/cold-start.md, "Re-select fallback").

When neither the state nor a handoff can fill a placeholder, the engine may read the row from
the source database (hydrator/reselect/client.py, an imperative shell). What it read is the
row *now*, which may be newer than the event. The pure rules here decide, per column, what the
output may say about it:

* exact: the row version read was written by the event's own transaction (its `xmin` is the
  event's `source.txId`) and no later event of the key from that transaction was seen in the
  batch: nothing wrote the row since, so the value is the row's value at the event. Listed in
  `hydrator.reselected`, and it seeds the state (it is a true image of the row at the event).
* current: the row was written since (the value may be newer than the event). Listed in
  `hydrator.reselected.current`; the output still carries it, but the state does not keep it:
  a later event would otherwise be filled, unmarked, with a value newer than itself.

Transaction ids: Postgres' `xmin` is a 32-bit xid; Debezium's `txId` may be that xid or a
64-bit one with the epoch in the high bits (xid8). They are compared modulo 2^32: a row version
from exactly 2^32 transactions after the event would be mistaken for the event's, which needs a
stream more than four billion transactions behind its database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hydrator.events import Headers

HEADER_RESELECTED = "hydrator.reselected"
HEADER_RESELECTED_CURRENT = "hydrator.reselected.current"
XID_MODULUS = 2**32


@dataclass(frozen=True, slots=True)
class Reselected:
    """Column values read from the source for one event: `values` (column -> value as the
    connector ships it), and the columns among them proven to be the row's value at the event."""

    values: Mapping[str, Any]
    exact: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ReselectedRow:
    """A row as read from the source: its column values (encoded as the connector ships them)
    and the id of the transaction that wrote this version (`xmin`)."""

    values: Mapping[str, Any]
    xmin: int


def same_transaction(xmin: int, tx_id: int | None) -> bool:
    """Whether the row version `xmin` was written by transaction `tx_id` (32-bit or xid8)."""
    return tx_id is not None and xmin % XID_MODULUS == tx_id % XID_MODULUS


def reselected_for(
    row: ReselectedRow | None,
    columns: tuple[str, ...],
    tx_id: int | None,
    rewritten_in_batch: bool = False,
) -> Reselected | None:
    """What a read row gives an event missing `columns`: every one the row holds; exact when the
    row version is the event transaction's own and the batch shows no later change of the key in
    that transaction (`rewritten_in_batch`). None when the row is gone (deleted since)."""
    if row is None:
        return None
    values = {column: row.values[column] for column in columns if column in row.values}
    if not values:
        return None
    proven = not rewritten_in_batch and same_transaction(row.xmin, tx_id)
    return Reselected(values, frozenset(values) if proven else frozenset())


def reselect_headers(exact: tuple[str, ...], current: tuple[str, ...]) -> Headers:
    """The output headers for re-selected columns (each only when non-empty, like
    `hydrator.filled`); every re-selected column is in exactly one of them."""
    headers: list[tuple[str, bytes | None]] = []
    if exact:
        headers.append((HEADER_RESELECTED, ",".join(exact).encode()))
    if current:
        headers.append((HEADER_RESELECTED_CURRENT, ",".join(current).encode()))
    return tuple(headers)
