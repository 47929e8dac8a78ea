"""Record size limits, checked before producing, the same way by both engines.

A broker rejects a record batch larger than its topic's `max.message.bytes`, and the producer
refuses a record larger than its `message.max.bytes`; either failure would fail the batch again
after every restart. So every record is measured before it is produced:

* a record too large for its output (or handoff) topic becomes a dead letter with the reason;
* a dead letter too large for the dead-letter topic keeps its key and headers and a truncated
  value, marked by the `hydrator.truncated` header, so writing a dead letter never fails.

The topics the engines create get a `max.message.bytes` derived from `--max-record-bytes`:
outputs and handoffs carry whole row images (`after` and the filled `before`), the state
changelog an image plus the records parked on it, so their limits are multiples of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Headers = Sequence[tuple[str, bytes | None]]

HEADER_TRUNCATED = "hydrator.truncated"
HEADER_ERROR = "hydrator.error"

# Room for the envelope around filled values, headers and the record batch framing.
MARGIN_BYTES = 1024 * 1024
# The producer's `message.max.bytes` cannot go higher (librdkafka's range ends there).
PRODUCER_MAX_BYTES = 1_000_000_000
# librdkafka's default receive.message.max.bytes.
RECEIVE_DEFAULT = 100_000_000
# Kafka's record batch header (v2), and a bound on one record's varints and attributes.
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD = 40
_HEADER_OVERHEAD = 10


@dataclass(frozen=True)
class TopicLimits:
    """`max.message.bytes` of each kind of topic an engine creates, for one --max-record-bytes."""

    output: int
    handoff: int
    changelog: int
    dlq: int

    @classmethod
    def for_max_record_bytes(cls, max_record_bytes: int) -> TopicLimits:
        def cap(n: int) -> int:
            return min(n, PRODUCER_MAX_BYTES)

        images = cap(2 * max_record_bytes + MARGIN_BYTES)  # after + before
        return cls(
            output=images,
            handoff=images,  # the old image travels whole
            changelog=cap(3 * max_record_bytes + MARGIN_BYTES),  # image + parked records
            dlq=images,
        )

    @property
    def producer(self) -> int:
        """The producer's `message.max.bytes`: nothing the engine writes may need more."""
        return max(self.output, self.handoff, self.changelog, self.dlq)

    @property
    def consumer(self) -> dict[str, int]:
        """Consumer settings that let the engine read back the largest record it may write (the
        changelog on restore): librdkafka's 100 MB response limit would otherwise be lower."""
        return {"receive.message.max.bytes": max(RECEIVE_DEFAULT, self.producer + MARGIN_BYTES)}


def record_bytes(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """An upper bound of the record's size in a batch of its own, as the broker measures it."""
    size = _BATCH_OVERHEAD + _RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    for name, header_value in headers or ():
        size += _HEADER_OVERHEAD + len(name.encode()) + len(header_value or b"")
    return size


@dataclass(frozen=True, slots=True)
class Produced:
    """What to produce instead of a record: its topic, key, value and headers."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    dead: bool = False  # the record became a dead letter because of its size


@dataclass(frozen=True)
class RecordLimits:
    """Per-topic limits (`max.message.bytes`, within the producer's own limit) and where records
    that exceed them go."""

    dlq_topic: str
    limits: Mapping[str, int]
    default: int  # for topics not in `limits`: the producer's message.max.bytes

    def limit(self, topic: str) -> int:
        return min(self.limits.get(topic, self.default), self.default)

    def smallest(self) -> int:
        """The least any written topic takes: a producer batch, which may mix the topics of a
        partition leader, must stay under it (librdkafka does not split a batch the broker
        refuses as too large; Kafka's Java producer does)."""
        return min((self.limit(topic) for topic in self.limits), default=self.default)

    def fits(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers | None
    ) -> bool:
        """Whether the record fits its topic as it is (`check` would return it unchanged),
        without making anything: the common case, once per record written."""
        return record_bytes(key, value, headers) <= self.limit(topic)

    def check(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
    ) -> Produced:
        """The record as it may be produced: unchanged when it fits; else a dead letter (with a
        truncated value when it does not fit the dead-letter topic either)."""
        listed = list(headers) if headers else None
        size = record_bytes(key, value, listed)
        limit = self.limit(topic)
        if size <= limit:
            return Produced(topic, key, value, listed)
        if topic == self.dlq_topic:
            return truncated(self.dlq_topic, key, value, listed, limit)
        reason = (
            f"record for {topic} is {size} bytes, over the topic's {limit}-byte limit "
            "(max.message.bytes)"
        )
        dead_headers = [*(listed or ()), (HEADER_ERROR, reason.encode())]
        dlq_limit = self.limit(self.dlq_topic)
        return truncated(self.dlq_topic, key, value, dead_headers, dlq_limit, dead=True)


def truncated(
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
    limit: int,
    dead: bool = False,
) -> Produced:
    """A dead letter cut down to `limit`: the value first, then (only if key and headers alone are
    too large) the key, then the headers the engine did not add. `hydrator.truncated` lists what
    was cut with its original size (`value=73400320`)."""
    cuts: list[str] = []
    marker_room = _HEADER_OVERHEAD + len(HEADER_TRUNCATED) + 64

    def excess() -> int:
        return record_bytes(key, value, headers) + marker_room - limit

    if excess() > 0 and value:
        cuts.append(f"value={len(value)}")
        value = value[: max(len(value) - excess(), 0)]
    if excess() > 0 and key:
        cuts.append(f"key={len(key)}")
        key = key[: max(len(key) - excess(), 0)]
    if excess() > 0 and headers:
        kept = [(n, v) for n, v in headers if n.startswith("hydrator.")]
        cuts.append(f"headers={len(headers) - len(kept)}")
        headers = kept
        if excess() > 0:  # even the engine's own headers: keep their names
            headers = [(n, (v or b"")[:256]) for n, v in headers]
    if cuts:
        headers = [*(headers or ()), (HEADER_TRUNCATED, ",".join(cuts).encode())]
    return Produced(topic, key, value, headers, dead)
