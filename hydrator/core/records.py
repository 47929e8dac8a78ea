"""What comes out of the core: output and dead-letter records, and the Transition of one step
(records in are hydrator.events.RawRecord; handoffs are state.handoff.Handoff).

All are values: nothing changes one after it is made. Those made for every event are not
`frozen` dataclasses only because a frozen constructor costs five times as much, and their
`__init__` is written out: a compiled dataclass's generated one is interpreted (setup.py;
tests/unit/project/test_compiled.py checks each sets every field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hydrator.events import Headers, RawRecord
from state.handoff import Handoff
from state.record import StateRecord

HEADER_FILLED = "hydrator.filled"
HEADER_UNRESOLVED = "hydrator.unresolved"
HEADER_SOURCE = "hydrator.source"
HEADER_ERROR = "hydrator.error"


@dataclass(slots=True)
class OutputRecord:
    """A record for the output (or dead-letter) topic, written to `partition` (the input's)."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    def __init__(
        self, partition: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> None:
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers


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

    def __init__(
        self,
        state: StateRecord | None,
        emitted: tuple[OutputRecord, ...] = (),
        handoffs: tuple[Handoff, ...] = (),
        dead: tuple[DeadLetter, ...] = (),
        counts: Mapping[str, int] | None = None,
    ) -> None:
        self.state = state
        self.emitted = emitted
        self.handoffs = handoffs
        self.dead = dead
        self.counts = {} if counts is None else counts
