"""A patch stream of Debezium change events (MySQL-style, `binlog_row_image=MINIMAL`): inserts
ship the whole row, updates only the key and the columns they wrote, and `before` is null, the
key alone or a few columns. Beside every event the model keeps the full images a full-row feed
would have shipped, computed from its own table, never through a codec: hydrating the patch
stream with `--fill-absent` must give exactly those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from hydrator import exact

Before = Literal["null", "key", "partial"]
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


@dataclass(frozen=True)
class PatchEvent:
    key: int
    op: str
    position: int
    value: bytes
    # what a full-row feed ships for this change
    full_after: dict[str, Any] | None
    full_before: dict[str, Any] | None
    # a copy of an earlier event (a connector restart replays what it had sent): stale
    duplicate: bool = False

    @property
    def record(self) -> Record:
        return key_bytes(self.key), self.value, []


def key_bytes(key: int) -> bytes:
    return orjson.dumps({"id": key})


@dataclass
class PatchStream:
    table: str = "items"
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    events: list[PatchEvent] = field(default_factory=list)
    position: int = 0

    def insert(self, key: int, values: dict[str, Any]) -> PatchEvent:
        row = {"id": key, **values}
        self.rows[key] = row
        return self._emit(key, "c", None, dict(row), None, dict(row))

    def update(
        self, key: int, changes: dict[str, Any], before: Before, kept: tuple[str, ...] = ()
    ) -> PatchEvent:
        """Write `changes`; the event's `after` is the key and the changed columns; its
        `before` is null, the key alone, or the key and the old values of `kept`."""
        old = self.rows[key]
        row = {**old, **changes}
        self.rows[key] = row
        after = {"id": key, **changes}
        return self._emit(key, "u", self._before(old, before, kept), after, dict(old), dict(row))

    def delete(self, key: int, before: Before, kept: tuple[str, ...] = ()) -> PatchEvent:
        old = self.rows.pop(key)
        shipped = self._before(old, "key" if before == "null" else before, kept)
        return self._emit(key, "d", shipped, None, dict(old), None)

    def redeliver(self, back: int) -> PatchEvent:
        """The event `back` positions before the last one again, as it was first sent."""
        original = self.events[-min(back, len(self.events))]
        copy = PatchEvent(
            original.key,
            original.op,
            original.position,
            original.value,
            original.full_after,
            original.full_before,
            duplicate=True,
        )
        self.events.append(copy)
        return copy

    @staticmethod
    def _before(old: dict[str, Any], before: Before, kept: tuple[str, ...]) -> Any:
        if before == "null":
            return None
        if before == "key":
            return {"id": old["id"]}
        return {"id": old["id"], **{c: old[c] for c in kept if c in old and c != "id"}}

    def _emit(
        self,
        key: int,
        op: str,
        before: Any,
        after: Any,
        full_before: dict[str, Any] | None,
        full_after: dict[str, Any] | None,
    ) -> PatchEvent:
        self.position += 1
        value = exact.dumps(  # 64-bit integers and wider stay exact
            {
                "before": before,
                "after": after,
                "source": {
                    "connector": "mysql",
                    "table": self.table,
                    "file": "binlog.000003",
                    "pos": self.position,
                    "row": 0,
                },
                "op": op,
                "ts_ms": 1_700_000_000_000 + self.position,
            }
        )
        event = PatchEvent(key, op, self.position, value, full_after, full_before)
        self.events.append(event)
        return event


def mismatches(event: PatchEvent, hydrated: bytes | None) -> list[str]:
    """How a hydrated output differs from the full images of `event` (empty: none)."""
    if hydrated is None:
        return [f"position {event.position}: no value"]
    document = exact.loads(hydrated)
    problems = []
    if document.get("after") != event.full_after:
        problems.append(f"position {event.position}: after {document.get('after')}")
    if event.op in ("u", "d") and document.get("before") != event.full_before:
        problems.append(f"position {event.position}: before {document.get('before')}")
    return problems
