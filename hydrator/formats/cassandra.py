"""The Debezium Cassandra connector's change events (JSON, bare or in a Kafka Connect
`{"schema", "payload"}` envelope).

A value is `{"ts_ms", "op", "source", "after"}`; there is no `before`. `after` names every column
of the table plus `_range_start`/`_range_end`. A cell the mutation wrote is
`{"value": v, "deletion_ts": t, "set": true}` (a written NULL too, with value null); a column it
did not write is `null`. `op` is `i` (insert), `u` (update), `d` (row delete: every regular cell
as `{"value": null, "deletion_ts": T, "set": true}`) or `r` (range tombstone). The key is the
full primary key, `{"<partition and clustering columns>": ...}`.

Every node that holds a replica runs its own connector, so an event can arrive once per replica,
and a node logs writes as they reach it, not in the order clients issued them. Order is
therefore per cell: each written cell carries the mutation's write time (`source.ts_us`), and
the state keeps, per column, the cell of the latest write (ChangeEvent.cell_times). A column an
insert or update did not write is filled from that cell as
`{"value": <stored value>, "deletion_ts": null, "set": false}`: `set: false` tells a consumer the
cell was filled, not written.
"""

from __future__ import annotations

from typing import Any

from hydrator import exact
from hydrator.events import BadInput, ChangeEvent, Op, Passthrough, Patch, Read
from hydrator.formats import values
from hydrator.formats.debezium import unwrap
from hydrator.formats.keys import canonical_key, key_document

OPS = {"i": Op.CREATE, "u": Op.UPDATE, "d": Op.DELETE}
RANGE_TOMBSTONE = "r"
RANGE_COLUMNS = frozenset({"_range_start", "_range_end"})
CELL_FIELDS = frozenset({"value", "deletion_ts", "set"})
# Write times in microseconds, newest first: 2.x/3.x, the first releases, then 1.x (millis).
TIME_FIELDS = (("ts_us", 1), ("ts_micro", 1), ("ts_ms", 1000))
_INT64 = (-(2**63), 2**63 - 1)


class _Envelope:
    """What encode() needs: the value's bytes, its root document, its payload and the event's
    write time."""

    __slots__ = ("payload", "raw", "root", "write_time")

    def __init__(
        self, raw: bytes, root: dict[str, Any], payload: dict[str, Any], write_time: int
    ) -> None:
        self.raw = raw
        self.root = root
        self.payload = payload
        self.write_time = write_time


class CassandraCodec:
    name = "cassandra"
    key_in_record_key = True

    def key(self, read: Read) -> str | None:
        """The Kafka key (the primary key), canonical; a null key has no state."""
        raw_key = read.record.key
        return None if raw_key is None else canonical_key(raw_key)

    def accepts(self, document: Any) -> bool:
        """A Cassandra event: no `before` member, a Cassandra op and an `after` object, from
        the Cassandra connector or shaped as cells."""
        if not isinstance(document, dict):
            return False
        payload = document.get("payload") if "schema" in document else document
        if not isinstance(payload, dict) or "before" in payload:
            return False
        after = payload.get("after")
        if payload.get("op") not in ("i", "u", "d", "r") or not isinstance(after, dict):
            return False
        source = payload.get("source")
        if isinstance(source, dict) and source.get("connector") == "cassandra":
            return True
        cells = [v for c, v in after.items() if c not in RANGE_COLUMNS and v is not None]
        return bool(cells) and all(isinstance(v, dict) and v.keys() == CELL_FIELDS for v in cells)

    def decode(self, read: Read) -> ChangeEvent | Passthrough:
        record = read.record
        if record.value is None:
            return Passthrough("kafka tombstone")
        # read once, also under --format auto; fractions (double, float, decimal columns) keep
        # their digits as written
        root = values.document_object(read, decimals=True)
        payload, _ = unwrap(root)
        if "op" not in payload:
            raise BadInput("not a Cassandra change event: no 'op' field")
        raw_op = payload["op"]
        if raw_op == RANGE_TOMBSTONE:
            return Passthrough("range tombstone")
        op = OPS.get(raw_op) if type(raw_op) is str else None
        if op is None:
            raise BadInput(f"unknown op {raw_op!r}")
        after = payload.get("after")
        if not isinstance(after, dict):
            kind = "no" if after is None else f"a JSON {type(after).__name__} as"
            raise BadInput(f"op {raw_op!r} with {kind} 'after' (an object of cells is needed)")
        write_time = _write_time(payload.get("source"))
        cells = {c: _cell(c, v) for c, v in after.items() if c not in RANGE_COLUMNS}
        if op is Op.DELETE:
            if _deletes_more_than_a_row(record.key, cells):
                return Passthrough("partition deletion")
            # a null cell in a delete is a deleted one (the connector's documentation shows
            # deletes so): a row delete removes every cell at its write time
            written = {c: v or _deleted(write_time) for c, v in cells.items()}
            missing: tuple[str, ...] = ()
        else:
            written = {c: v for c, v in cells.items() if v is not None and v["set"]}
            missing = tuple(c for c in cells if c not in written)
        return ChangeEvent(
            op,
            None,
            {**written, **dict.fromkeys(missing)},
            missing_after=missing,
            envelope=_Envelope(record.value, root, payload, write_time),
            cell_times=dict.fromkeys(written, write_time),
        )

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes:
        """Filled cells are written as unwritten ones (`set: false`); nothing else changes.
        There is no `before` to render."""
        envelope: _Envelope = event.envelope
        if not patch.after:
            return envelope.raw
        after = envelope.payload["after"]
        for column, stored in patch.after.items():
            after[column] = None if stored is None else _filled(stored, envelope.write_time)
        return exact.dumps(envelope.root)


def _write_time(source: Any) -> int:
    """The mutation's write time in microseconds."""
    if not isinstance(source, dict):
        raise BadInput("no 'source' object: the write time is in source.ts_us")
    for name, scale in TIME_FIELDS:
        time = source.get(name)
        if time is None:
            continue
        if type(time) is not int:
            raise BadInput(f"source.{name} is {_json(time)}, not an integer")
        time *= scale
        if not _INT64[0] <= time <= _INT64[1]:
            raise BadInput(f"source.{name} out of range (64 bits): {time}")
        return time
    raise BadInput("source has no write time (ts_us, ts_micro or ts_ms)")


def _cell(column: str, cell: Any) -> dict[str, Any] | None:
    """A column of `after`: null (not written) or a cell object, checked."""
    if cell is None:
        return None
    if not isinstance(cell, dict):
        raise BadInput(f"cell {column!r} is a JSON {type(cell).__name__}, not an object or null")
    if cell.keys() != CELL_FIELDS:
        raise BadInput(f"cell {column!r} has fields {sorted(cell)}, not value, deletion_ts and set")
    if type(cell["set"]) is not bool:
        raise BadInput(f"cell {column!r}: 'set' is {_json(cell['set'])}, not a boolean")
    deletion = cell["deletion_ts"]
    if deletion is not None and type(deletion) is not int:
        raise BadInput(f"cell {column!r}: 'deletion_ts' is {_json(deletion)}, not an integer")
    return cell


def _json(value: Any) -> str:
    """A value as the record spells it, for a dead letter's reason."""
    try:
        return exact.dumps(value).decode()
    except exact.ExactJSONError:
        return repr(value)


def _deleted(write_time: int) -> dict[str, Any]:
    return {"value": None, "deletion_ts": write_time, "set": True}


def _deletes_more_than_a_row(raw_key: bytes | None, cells: dict[str, Any]) -> bool:
    """A partition deletion of a table with clustering columns: the clustering columns come
    null, in the key and as deletion cells. It removes every row of the partition, which no
    single row's state stands for."""
    if raw_key is None:
        return False
    key = key_document(raw_key)
    if not isinstance(key, dict):
        return False
    for column, value in key.items():
        cell = cells.get(column)
        if value is None or (cell is not None and cell["value"] is None):
            return True
    return False


def _filled(stored: dict[str, Any], at: int) -> dict[str, Any]:
    """The stored cell as an unwritten one. A cell written with a TTL has expired by `at` when
    its `deletion_ts` (the expiry time) is not after it: a read at `at` sees null."""
    expires = stored["deletion_ts"]
    value = None if expires is not None and expires <= at else stored["value"]
    return {"value": value, "deletion_ts": None, "set": False}


__all__ = ["CassandraCodec"]
