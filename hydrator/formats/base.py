"""The codec interface: a format turns a Kafka record into a neutral ChangeEvent and back.

Adding a format means one module implementing `Codec` and its tests; the core never looks inside
an envelope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from hydrator.core.records import RawRecord

Position = tuple[int, ...]


class BadInput(ValueError):
    """The record cannot be understood; its message is the dead-letter reason."""


class Op(StrEnum):
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"


@dataclass(slots=True)
class ChangeEvent:
    """One row change, format-neutral.

    Column values stay in the envelope's own representation, so state images copy straight back.
    `missing_*` name the columns whose value is a "not shipped" marker; `key_columns` are the
    primary-key column names (used to tell a key-only `before`).
    """

    op: Op
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    missing_before: tuple[str, ...] = ()
    missing_after: tuple[str, ...] = ()
    key_columns: frozenset[str] = frozenset()
    position: Position | None = None
    old_key: str | None = None
    new_key: str | None = None
    new_key_route: bytes | None = None
    envelope: Any = None  # codec-private: what encode() needs to rebuild the record


@dataclass(frozen=True, slots=True)
class Passthrough:
    """A record that is forwarded unchanged (Kafka tombstone, truncate, checkpoint markers)."""

    reason: str


@dataclass(slots=True)
class Patch:
    """What hydration changed: column values to set in `after` / `before`, or a whole new
    `before` (replacing a null or key-only one)."""

    after: dict[str, Any] = field(default_factory=dict)
    before: dict[str, Any] = field(default_factory=dict)
    whole_before: Mapping[str, Any] | None = None

    def __bool__(self) -> bool:
        return bool(self.after or self.before or self.whole_before is not None)


class Codec(Protocol):
    name: str

    def accepts(self, document: Any) -> bool:
        """Whether a parsed value looks like this format (for `--format auto`)."""
        ...

    def decode(self, record: RawRecord) -> ChangeEvent | Passthrough:
        """Decode a record; raises BadInput (InvalidKey for an undecodable record key) with a clear
        reason."""
        ...

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes:
        """The record's value with `patch` applied, in the same envelope; nothing else changes."""
        ...
