"""The format boundary: what a codec reads (a Kafka record, through the Read both its `key` and
its `decode` take), what it hands the core (a neutral ChangeEvent) and what the core hands back
for it to render (a Patch). Nothing here imports from the rest of the package: codecs, the core,
state and engines all build on this module.

Adding a format (docs/formats.md) is one module implementing `Codec` under `hydrator/formats/`,
one entry in the registry (`hydrator/formats/__init__.py`) and its tests. The core never looks
inside an envelope and never branches on a format's name: everything it needs to know about one
event is in the ChangeEvent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from hydrator.errors import RecordError, TemporaryFailure

Headers = tuple[tuple[str, bytes | None], ...]
Position = tuple[int, ...]
Image = Mapping[str, Any]


class BadInput(RecordError, ValueError):
    """The record cannot be understood; its message is the dead-letter reason."""


class InvalidKey(RecordError, ValueError):
    """The key bytes are not a decodable key."""


class Unavailable(TemporaryFailure):
    """A service a codec needs to read records (a schema registry) did not answer after its
    retries. Not the record's fault: never a dead letter; the engine stops with the exit a
    supervisor restarts it on, and the record is read again after the restart. (Not also a
    RuntimeError: a compiled class derives from few builtin exceptions, setup.py.)"""


@dataclass(slots=True)
class RawRecord:
    """A record as read from an input topic. A value: nothing changes one after it is made (not
    a `frozen` dataclass only because one is made per record, and that costs five times as
    much). The per-record classes here write their `__init__` out: a compiled dataclass's
    generated one is interpreted (setup.py; tests/unit/project/test_compiled.py checks each sets
    every field)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int = 0

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = (),
        timestamp_ms: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp_ms = timestamp_ms

    @property
    def source(self) -> str:
        """`topic:partition:offset`, the downstream dedupe id (docs/rules.md, rule 7)."""
        return f"{self.topic}:{self.partition}:{self.offset}"

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def to_tuple(self) -> list[Any]:
        return [
            self.topic,
            self.partition,
            self.offset,
            self.key,
            self.value,
            [list(h) for h in self.headers],
            self.timestamp_ms,
        ]

    @classmethod
    def from_tuple(cls, data: list[Any]) -> RawRecord:
        topic, partition, offset, key, value, headers, ts = data
        return cls(
            topic, partition, offset, key, value, tuple((name, val) for name, val in headers), ts
        )


@dataclass(slots=True)
class Read:
    """One input record as its codec reads it. An engine makes one per record and hands that
    one to `Hydrator.route` and then to `Hydrator.process`, so the codec's `key` and `decode`
    take the same Read: whatever one of them parsed of the value is there for the other, and the
    value is parsed at most once per record, by whichever step needs it first
    (hydrator.formats.values). Nothing outlives the record's step: no cache keyed by records.

    `document` is the value as JSON once `parsed` (`decimals`: read with fractions as Decimals,
    hydrator.exact); `chosen` is the codec that a codec choosing per record (`auto`) chose for
    this one. Only codecs write these fields."""

    record: RawRecord
    document: Any = None
    parsed: bool = False
    decimals: bool = False
    chosen: Codec | None = None

    def __init__(
        self,
        record: RawRecord,
        document: Any = None,
        parsed: bool = False,
        decimals: bool = False,
        chosen: Codec | None = None,
    ) -> None:
        self.record = record
        self.document = document
        self.parsed = parsed
        self.decimals = decimals
        self.chosen = chosen


class Op(StrEnum):
    """What the rules do per op: `after` of CREATE/UPDATE/READ is filled and becomes the stored
    image; `before` of UPDATE/DELETE is filled (or replaced by the stored image when it is null
    or key-only); a DELETE leaves a tombstone (except under cell times, see ChangeEvent)."""

    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"


class Absent(StrEnum):
    """What a column of the stored image means when the event's image does not name it."""

    DROPPED = "dropped"
    """The row no longer has it (a full-row format: the table dropped the column). It is not
    brought back, and the stored image forgets it."""

    MISSING = "missing"
    """Not shipped (a patch stream carries only changed columns): filled like a missing column,
    in `after` of CREATE/UPDATE/READ and in a non-null, non-key-only `before` of UPDATE/DELETE."""

    NULL = "null"
    """Set to NULL (a replace that names only the columns it writes): the new image holds it as
    None. Nothing is added to the event's `after`; the codec renders `Patch.new_image`."""


@dataclass(slots=True)
class ChangeEvent:
    """One row change, format-neutral.

    Column values stay in the envelope's own representation, so state images copy straight back
    and the codec renders them unchanged. How the event says a column was not shipped:

    * `missing_after` / `missing_before`: columns present in the image whose value is a "not
      shipped" marker (Debezium's placeholder, Cassandra's unwritten `null` cell);
    * `absent`: what a stored column the image does not name means (Absent);
    * `cell_times`: per-cell write times (column -> int, larger is later), for sources whose
      replicas deliver cells out of order (Cassandra). When given, state is kept per cell: each
      column of `after` named here replaces the stored cell only when its time is later than the
      stored cell's (equal times: the larger value by canonical JSON, so the winner does not
      depend on arrival order); columns not named are not stored. There is no row tombstone:
      a delete is a write of the deletion cells the codec puts in `after`.

    `key_columns` are the primary-key column names (to tell a key-only `before`); `position`
    orders a key's events (rule 4: at or before the stored one is stale; None: no ordering);
    `old_key`/`new_key` are canonical keys of a primary-key change (rule 5) and
    `new_key_route` the new key's raw Kafka key bytes, so the handoff is partitioned like the
    input. `transaction` is the source transaction's id where the format gives one (Debezium
    Postgres: `source.txId`), to place the event against a bootstrap snapshot. `envelope` is
    codec-private: whatever `encode` needs to rebuild the record.
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
    envelope: Any = None
    absent: Absent = Absent.DROPPED
    cell_times: Mapping[str, int] | None = None
    transaction: int | None = None

    def __init__(
        self,
        op: Op,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        missing_before: tuple[str, ...] = (),
        missing_after: tuple[str, ...] = (),
        key_columns: frozenset[str] = frozenset(),
        position: Position | None = None,
        old_key: str | None = None,
        new_key: str | None = None,
        new_key_route: bytes | None = None,
        envelope: Any = None,
        absent: Absent = Absent.DROPPED,
        cell_times: Mapping[str, int] | None = None,
        transaction: int | None = None,
    ) -> None:
        self.op = op
        self.before = before
        self.after = after
        self.missing_before = missing_before
        self.missing_after = missing_after
        self.key_columns = key_columns
        self.position = position
        self.old_key = old_key
        self.new_key = new_key
        self.new_key_route = new_key_route
        self.envelope = envelope
        self.absent = absent
        self.cell_times = cell_times
        self.transaction = transaction


@dataclass(frozen=True, slots=True)
class Passthrough:
    """A record that is forwarded unchanged (Kafka tombstone, truncate, barriers)."""

    reason: str


@dataclass(slots=True)
class Patch:
    """What hydration computed for one event, for the codec to render in its envelope.

    `after` / `before`: column values to set in the event's `after` / `before` (filled missing
    and absent columns; None for an unresolved column under `--on-unresolved null`);
    `whole_before`: a complete `before` replacing a null or key-only one. `old_image` is the
    stored row the event was filled from (None: the key had no live row); `new_image` the row
    after the event (None after a delete). A codec renders what its envelope carries: the
    column values, whole images (newImage/oldImage, before), or a wrapper around a filled value.
    """

    after: dict[str, Any] = field(default_factory=dict)
    before: dict[str, Any] = field(default_factory=dict)
    whole_before: Image | None = None
    old_image: Image | None = None
    new_image: Image | None = None

    def __init__(
        self,
        after: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        whole_before: Image | None = None,
        old_image: Image | None = None,
        new_image: Image | None = None,
    ) -> None:
        self.after = {} if after is None else after
        self.before = {} if before is None else before
        self.whole_before = whole_before
        self.old_image = old_image
        self.new_image = new_image

    def __bool__(self) -> bool:
        """Whether any column of the event's own images changes (whole images aside)."""
        return bool(self.after or self.before or self.whole_before is not None)


class Codec(Protocol):
    """One envelope format. `key` and `decode` take the record's Read (read its value through
    hydrator.formats.values, so the two share one parse). Every method may raise for what a
    record holds: the core turns any exception from `key` and `decode` into a dead letter whose
    reason is `<ExceptionType>: <message>`, so raise BadInput (InvalidKey for a key) with a
    message that says what is wrong."""

    name: str
    key_in_record_key: bool
    """True when `key` reads nothing but the Kafka key (and is None exactly when it is null):
    engines may then remember keys per key bytes. False when identity is in the value."""

    def accepts(self, document: Any) -> bool:
        """Whether a parsed value looks like this format (for `--format auto`)."""
        ...

    def key(self, read: Read) -> str | None:
        """The canonical key the record's state lives under (one spelling per row, valid UTF-8:
        engines build store keys and shuffle groups from it); None for a record without identity
        (hydrated statelessly: barriers, keyless records). Computed once per record, by the
        engine, before `decode`, with the Read `decode` then takes."""
        ...

    def decode(self, read: Read) -> ChangeEvent | Passthrough:
        """The record as a neutral change event, or Passthrough for one forwarded unchanged."""
        ...

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes | None:
        """The record's value with `patch` rendered in the same envelope; nothing else changes.
        Called for every event hydrated, also when `patch` is empty (a codec that adds whole
        images always has something to write); return the input bytes when nothing changes
        (None for a Kafka tombstone the format reads as a delete, which stays one)."""
        ...
