"""Which dead letters a replay takes, and what becomes of the others.

A replay reads the dead-letter topic from where the last replay stopped up to its end as it
stood when the replay started, and judges each record:
* `Replay`: a dead letter the selection admits; the record it holds goes through the rules again;
* `Leave`: a dead letter of an input record that the selection leaves out (or of a topic that is
  not one of the run's `--input-topic`): it is copied to the end of the dead-letter topic as it
  is (bytes, headers, timestamp), so a later replay still finds it past where this one stops;
* `Unreplayable` (letters.py): holds no input record; counted, and left where it is.

The filters all hold together (an empty one admits everything): the source topic, the error's
kind (a beginning of `hydrator.error`), when the record was dead-lettered (the dead-letter
record's timestamp), and the source offsets (`hydrator.source`). Offsets are the source's, not
the dead-letter topic's: a dead letter left for later or dead-lettered again moves to a new
offset of the dead-letter topic, but keeps its source, so a filter names the same records in
every replay (and the offsets `hydrator tail --dlq` shows as `source:`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from hydrator.config import parse_duration_ms
from hydrator.dlq.letters import Letter, Unreplayable, read_letter
from hydrator.events import RawRecord

_RANGE = re.compile(r"^\s*(?:(\d+)\s*:)?\s*(\d*)\s*(-?)\s*(\d*)\s*$")


@dataclass(frozen=True)
class OffsetRange:
    """Source offsets from `first` to `last` (both included; None: open), of one partition or
    (None) of every partition."""

    partition: int | None = None
    first: int | None = None
    last: int | None = None

    @classmethod
    def parse(cls, text: str) -> OffsetRange:
        """`[PARTITION:]FROM-TO`: `100-200`, `3:100-200`, `100-` (from 100 on), `-200`, `150`
        (that offset alone)."""
        match = _RANGE.match(text)
        if match is None or not (match.group(2) or match.group(4)):
            raise ValueError(
                f"{text!r} is not an offset range like 100-200, 3:100-200 (partition 3), "
                "100- or -200"
            )
        partition, first, dash, last = match.groups()
        low = int(first) if first else None
        high = int(last) if last else (low if not dash else None)
        if low is not None and high is not None and high < low:
            raise ValueError(f"{text!r}: the range ends before it starts")
        return cls(int(partition) if partition else None, low, high)

    def holds(self, partition: int, offset: int) -> bool:
        if self.partition is not None and partition != self.partition:
            return False
        if self.first is not None and offset < self.first:
            return False
        return self.last is None or offset <= self.last

    def __str__(self) -> str:
        where = f"{self.partition}:" if self.partition is not None else ""
        first = "" if self.first is None else str(self.first)
        last = "" if self.last is None else str(self.last)
        return f"{where}{first}" if self.first == self.last else f"{where}{first}-{last}"


def parse_moment(text: str, now_ms: int) -> int:
    """A moment, in ms since the epoch: an ISO 8601 date or time (`2026-05-01`,
    `2026-05-01T10:30:00+02:00`; UTC unless it names its offset), or a duration before now
    (`90m`, `2h`, `7d`)."""
    try:
        return now_ms - parse_duration_ms(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time like 2026-05-01T10:30:00Z or a duration before now like 2h"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class Selection:
    """The dead letters a replay takes (each filter empty: no restriction)."""

    source_topics: frozenset[str] = frozenset()
    error_kinds: tuple[str, ...] = ()  # beginnings of hydrator.error
    since_ms: int | None = None  # dead-lettered at or after
    until_ms: int | None = None  # dead-lettered before
    source_offsets: tuple[OffsetRange, ...] = ()

    def admits(self, letter: Letter) -> bool:
        original = letter.original
        if self.source_topics and original.topic not in self.source_topics:
            return False
        if self.error_kinds and not letter.error.startswith(self.error_kinds):
            return False
        if self.since_ms is not None and letter.dead_lettered_ms < self.since_ms:
            return False
        if self.until_ms is not None and letter.dead_lettered_ms >= self.until_ms:
            return False
        return not self.source_offsets or any(
            r.holds(original.partition, original.offset) for r in self.source_offsets
        )

    @property
    def everything(self) -> bool:
        return self == Selection()

    def describe(self) -> str:
        """The filters in words (`every dead letter` when there are none)."""
        parts = []
        if self.source_topics:
            parts.append("of " + ", ".join(sorted(self.source_topics)))
        if self.error_kinds:
            parts.append("whose error starts with " + " or ".join(map(repr, self.error_kinds)))
        if self.since_ms is not None:
            parts.append(f"dead-lettered from {_shown(self.since_ms)}")
        if self.until_ms is not None:
            parts.append(f"dead-lettered before {_shown(self.until_ms)}")
        if self.source_offsets:
            parts.append("at source offsets " + ", ".join(map(str, self.source_offsets)))
        return "dead letters " + "; ".join(parts) if parts else "every dead letter"


@dataclass(frozen=True)
class _Judged:
    letter: Letter

    @property
    def topic(self) -> str:
        return self.letter.original.topic

    @property
    def kind(self) -> str:
        return self.letter.kind


@dataclass(frozen=True)
class Replay(_Judged):
    """Hydrated again."""


@dataclass(frozen=True)
class Leave(_Judged):
    """Copied to the end of the dead-letter topic for a later replay."""

    why: str


Verdict = Replay | Leave | Unreplayable


def judge(
    record: RawRecord,
    selection: Selection,
    inputs: Collection[str],
    application_id: str,
    partitions: int,
) -> Verdict:
    """What a replay of `application_id` (reading `inputs`, of `partitions` partitions) does
    with `record` of its dead-letter topic."""
    letter = read_letter(record, application_id, partitions)
    if isinstance(letter, Unreplayable):
        return letter
    if letter.original.topic not in inputs:
        return Leave(letter, "its topic is not one of --input-topic")
    if not selection.admits(letter):
        return Leave(letter, "the filters leave it out")
    return Replay(letter)


def _shown(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
