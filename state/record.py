"""The state kept per (input topic, canonical key) — DESIGN §3."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hydrator.core.records import Handoff, RawRecord


@dataclass(frozen=True, slots=True)
class StateRecord:
    """`image` is the last full row (None before any image is known); `deleted` marks a tombstone.

    Key-change data is transient: `handoff` holds an old image that arrived before its CREATE;
    `parked` holds the records of this key waiting for a handoff, oldest first. Either has been
    waiting since `waiting_since_ms`.
    """

    image: dict[str, Any] | None = None
    pos: tuple[int, ...] | None = None
    deleted: bool = False
    updated_at_ms: int = 0
    handoff: Handoff | None = None
    parked: tuple[RawRecord, ...] = field(default=())
    waiting_since_ms: int | None = None

    @property
    def is_parked(self) -> bool:
        return bool(self.parked)


def state_key(topic: str, key: str) -> bytes:
    """The store key: state is per input topic and canonical key."""
    return f"{topic}\x00{key}".encode()
