"""A dead letter read back as the record it holds.

A dead letter of bad input (hydrator/core/records.py, `DeadLetter.to_output`) is the original
record's key, value and headers, written to the original's partition number, with two headers
added: `hydrator.error` (why) and `hydrator.source` (`topic:partition:offset` of the original).
Reading it back undoes that: the record a replay hands the task is the original, at its own
topic, partition and offset, so what comes of it names the original as its source, and the
original's headers are what they were (less the two the dead-letter topic added).

Some records of the dead-letter topic hold no input record, and no replay can take them:
* the state of a key too large for the changelog (`hydrator.source` is `<topic>:state`, no value);
* a handoff that could not be read or applied (its source is the handoff topic, or an offset of
  -1): it is the engine's own record, not input;
* an output or handoff too large for its topic (`record for <topic> is N bytes, over ...`): the
  record was hydrated already; its event is in the state, and replayed it would be stale;
* a dead letter cut to fit the dead-letter topic (`hydrator.truncated`): its bytes are not whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from hydrator.events import RawRecord
from hydrator.kafka.record_limits import HEADER_TRUNCATED
from hydrator.topology.layout import INTERNAL_TOPICS, internal_topic

# An exception's class name, as a reason names it (`debezium: BadInput: ...`).
_CLASS_NAME = re.compile(r"[A-Z][A-Za-z0-9_]*")
_ADDED = frozenset({HEADER_ERROR, HEADER_SOURCE})
# The reason a too-large output or handoff is dead-lettered with (hydrator/kafka/record_limits.py).
_OVERSIZE_OUTPUT = re.compile(r"record for \S+ is \d+ bytes, over the topic's")


@dataclass(frozen=True)
class Letter:
    """A dead letter a replay can take: `original` is the record it holds."""

    original: RawRecord
    error: str
    kind: str
    # when it was dead-lettered (the dead-letter record's timestamp, ms since the epoch)
    dead_lettered_ms: int


@dataclass(frozen=True)
class Unreplayable:
    """A record of the dead-letter topic that holds no input record to replay."""

    topic: str  # the source topic it names ("" when it names none)
    kind: str
    why: str


def error_kind(reason: str) -> str:
    """The kind of a dead letter's reason: its beginning, up to the exception's class when it
    names one (`cockroachdb: InvalidKey`, `auto (debezium): BadInput`), else up to its first
    colon (`unresolved columns`, `unreadable handoff`), else up to its first number (`value is`).
    Always a beginning of the reason, so it selects by `--error-kind`."""
    parts = reason.split(": ")
    if len(parts) >= 3 and _CLASS_NAME.fullmatch(parts[1]):
        return f"{parts[0]}: {parts[1]}"
    if len(parts) >= 2:
        return parts[0]
    number = re.search(r"\d", reason)
    return (reason[: number.start()] if number else reason).rstrip(" ,:") or reason


def read_letter(record: RawRecord, application_id: str, partitions: int) -> Letter | Unreplayable:
    """`record`, read from the dead-letter topic of `application_id` (whose inputs have
    `partitions` partitions), as the record it holds, or why no replay can take it."""
    error = _text(record.header(HEADER_ERROR))
    kind = error_kind(error) if error else "no hydrator.error"
    source = _text(record.header(HEADER_SOURCE))
    topic, sep, rest = source.partition(":")
    partition_text, sep2, offset_text = rest.partition(":")
    if not (sep and sep2) or not (_integer(partition_text) and _integer(offset_text)):
        why = (
            "the state of a key too large for the changelog, not a record"
            if rest == "state"
            else f"its hydrator.source {source[:200]!r} names no record (topic:partition:offset)"
        )
        return Unreplayable(topic if sep else "", kind, why)
    partition, offset = int(partition_text), int(offset_text)
    if topic in {internal_topic(application_id, suffix) for suffix in INTERNAL_TOPICS}:
        return Unreplayable(topic, kind, f"a record of the internal topic {topic}, not input")
    if offset < 0:
        return Unreplayable(topic, kind, "a key change's handoff, not input")
    if not 0 <= partition < partitions:
        return Unreplayable(
            topic, kind, f"its partition {partition} is not one of the input's {partitions}"
        )
    if record.header(HEADER_TRUNCATED) is not None:
        return Unreplayable(
            topic, kind, "cut to fit the dead-letter topic: its bytes are not whole"
        )
    if _OVERSIZE_OUTPUT.match(error):
        return Unreplayable(
            topic, kind, "an output too large for its topic: its event was hydrated already"
        )
    headers = tuple((name, value) for name, value in record.headers if name not in _ADDED)
    original = RawRecord(
        topic, partition, offset, record.key, record.value, headers, record.timestamp_ms
    )
    return Letter(original, error, kind, record.timestamp_ms)


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""


def _integer(text: str) -> bool:
    return text.lstrip("-").isdigit()
