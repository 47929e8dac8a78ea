"""What the live view shows of an enriched record: one row per key, its columns abbreviated,
and which of them the hydrator filled. Pure: no I/O, so the browser page's model is tested
without a broker."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from hydrator import exact
from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.events import Codec, Op, Passthrough, RawRecord, Read


@dataclass(frozen=True, slots=True)
class RowChange:
    """A key's row after one event; `columns` is None when the row was deleted."""

    key: str
    op: str
    columns: dict[str, str | None] | None
    lengths: dict[str, int]  # full length of each value `columns` shows abbreviated
    filled: tuple[str, ...]
    unresolved: tuple[str, ...]
    source: str  # the raw record it came from (`hydrator.source`), else this record

    def message(self) -> dict[str, Any]:
        if self.columns is None:
            return {"kind": "delete", "key": self.key, "op": self.op, "source": self.source}
        return {
            "kind": "row",
            "key": self.key,
            "op": self.op,
            "columns": self.columns,
            "lengths": self.lengths,
            "filled": list(self.filled),
            "unresolved": list(self.unresolved),
            "source": self.source,
        }


def row_change(record: RawRecord, codec: Codec, preview_chars: int) -> RowChange | None:
    """The row an enriched record leaves its key with; None for records that change no row
    (Kafka tombstones, truncate and heartbeat markers). Raises the codec's BadInput, or
    InvalidKey, for a record it cannot read."""
    read = Read(record)  # one parse for both
    event = codec.decode(read)
    if isinstance(event, Passthrough):
        return None
    key = codec.key(read) or record.source
    source_header = record.header(HEADER_SOURCE)
    source = source_header.decode(errors="replace") if source_header else record.source
    if event.op is Op.DELETE:
        return RowChange(key, event.op.value, None, {}, (), (), source)
    image = event.after or {}
    columns: dict[str, str | None] = {}
    lengths: dict[str, int] = {}
    for name, value in image.items():
        text = display(value)
        if text is not None and len(text) > preview_chars:
            lengths[name] = len(text)
            text = text[:preview_chars] + "…"
        columns[name] = text
    unresolved = dict.fromkeys((*_columns(record, HEADER_UNRESOLVED), *event.missing_after))
    return RowChange(
        key,
        event.op.value,
        columns,
        lengths,
        _columns(record, HEADER_FILLED),
        tuple(unresolved),
        source,
    )


def display(value: Any) -> str | None:
    """A column value as text: strings as they are, SQL NULL as None, the rest as JSON."""
    if value is None or isinstance(value, str):
        return value
    return exact.dumps(value).decode()


def _columns(record: RawRecord, header: str) -> tuple[str, ...]:
    raw = record.header(header)
    if not raw:
        return ()
    return tuple(c for c in raw.decode(errors="replace").split(",") if c)


class LatestRows:
    """The latest row of the most recently changed keys, at most `capacity` of them: what a
    browser that connects now is shown before the live changes."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._rows: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def apply(self, change: RowChange) -> dict[str, Any]:
        """Record the change; returns the message that tells browsers about it."""
        message = change.message()
        self._rows.pop(change.key, None)
        if change.columns is not None:
            self._rows[change.key] = message
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)
        return message

    def snapshot(self) -> dict[str, Any]:
        """Every kept row, oldest change first."""
        return {"kind": "snapshot", "rows": list(self._rows.values())}

    def __len__(self) -> int:
        return len(self._rows)
