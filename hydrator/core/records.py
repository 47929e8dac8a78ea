"""What flows in and out of the core: Kafka records in, output/handoff/dead-letter records out.

All are values: nothing changes one after it is made. Those made for every event are not
`frozen` dataclasses only because a frozen constructor costs five times as much.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hydrator import exact

if TYPE_CHECKING:
    from state.record import StateRecord

Headers = tuple[tuple[str, bytes | None], ...]

HEADER_FILLED = "hydrator.filled"
HEADER_UNRESOLVED = "hydrator.unresolved"
HEADER_SOURCE = "hydrator.source"
HEADER_ERROR = "hydrator.error"


@dataclass(slots=True)
class RawRecord:
    """A record as read from an input topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int = 0

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
class OutputRecord:
    """A record for the output (or dead-letter) topic, written to `partition` (the input's)."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Bad input: the original bytes with the reason (docs/rules.md, rule 8)."""

    record: RawRecord
    reason: str

    def to_output(self) -> OutputRecord:
        headers = (
            *self.record.headers,
            # a reason can quote the record, lone surrogates and all
            (HEADER_ERROR, self.reason.encode("utf-8", "backslashreplace")),
            (HEADER_SOURCE, self.record.source.encode()),
        )
        return OutputRecord(self.record.partition, self.record.key, self.record.value, headers)


@dataclass(frozen=True, slots=True)
class Handoff:
    """The old image travelling from a primary key's old key to its new key (docs/rules.md, rule 5).

    `route_key` is the best reconstruction of the new key's raw Kafka key bytes, so an engine
    can send the handoff to the partition that owns the new key; state is keyed by `new_key`.
    """

    topic: str
    new_key: str
    old_key: str
    image: Mapping[str, Any] | None
    pos: tuple[int, ...] | None
    source: str
    route_key: bytes | None = None

    def encode(self) -> bytes:
        """Version 1: msgpack; version 2 (only when needed, so that releases that know only 1
        read the others): the image holds integers wider than 64 bits (hydrator.exact)."""
        body = [
            1,
            self.topic,
            self.new_key,
            self.old_key,
            self.image,
            list(self.pos) if self.pos is not None else None,
            self.source,
            self.route_key,
        ]
        packed, wide = exact.pack(body)
        if wide:
            body[0] = 2
            packed, _ = exact.pack(body)
        return packed

    @classmethod
    def decode(cls, data: bytes) -> Handoff:
        """Raises ValueError for bytes that are not a handoff: anyone can write to the handoff
        topic, and a handoff of the wrong shape kept in state would fail the key's records."""
        body = exact.unpack(data)
        if not isinstance(body, list) or len(body) != 8:
            raise ValueError("not a handoff record")
        version, topic, new_key, old_key, image, pos, source, route_key = body
        if version not in (1, 2):
            raise ValueError(f"unknown handoff format version {version}")
        if not (
            isinstance(topic, str)
            and isinstance(new_key, str)
            and isinstance(old_key, str)
            and isinstance(image, dict | None)
            and (pos is None or (isinstance(pos, list) and all(type(p) is int for p in pos)))
            and isinstance(source, str)
            and isinstance(route_key, bytes | None)
        ):
            raise ValueError("a handoff record with fields of the wrong type")
        return cls(
            topic,
            new_key,
            old_key,
            image,
            tuple(pos) if pos is not None else None,
            source,
            route_key,
        )


@dataclass(slots=True)
class Transition:
    """The result of one pure step: the new state record (None = forget the key) and the outputs.

    `counts` names what happened (`stale_dropped`, `unresolved_columns`, `parked`, ...) for metrics.
    """

    state: StateRecord | None
    emitted: tuple[OutputRecord, ...] = ()
    handoffs: tuple[Handoff, ...] = ()
    dead: tuple[DeadLetter, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
