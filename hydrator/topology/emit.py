"""A core `Transition` as Kafka records, the same for both engines.

`emit` sends a step's results to a `Sink`: each output to its input's output topic, each dead
letter to the DLQ, each handoff to the partition owning its new key (or to a task of this
process that owns it, `keep_local`). `TopicWriter` is the Sink that makes them Kafka records:
topic, partition, key, value, headers.

A handoff record's key is the new key's state key, `<input topic>\\x00<canonical new key>`: the
Spark engine groups handoffs by it (it is the group of the new key's inputs), and the embedded
engine reads the value only (the partition says which task), so either engine reads what the
other, or an older release of itself, wrote. The value is the encoded Handoff (state/handoff.py);
its one header, `hydrator.source`, names the record that made it (readers go by the value).

Headers: the core appends its own `hydrator.*` headers after the incoming ones. A record that
already carries one of them (a dead letter replayed into the input carries `hydrator.source` and
`hydrator.error`) would leave with two, the stale one first, and a consumer that reads the first
would read the wrong one. So where a header the engine writes comes twice, the engine's (the
last) stays and the incoming one goes; an incoming `hydrator.source` is kept as
`hydrator.source.original` (unless the record has one already: that one is older still).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from hydrator.core.changes import HEADER_CHANGED
from hydrator.core.hydrator import HEADER_STALE
from hydrator.core.records import (
    HEADER_ERROR,
    HEADER_FILLED,
    HEADER_SOURCE,
    HEADER_UNRESOLVED,
    OutputRecord,
    Transition,
)
from hydrator.core.reselected import HEADER_RESELECTED, HEADER_RESELECTED_CURRENT
from hydrator.events import Headers
from hydrator.topology.layout import Topology
from state.handoff import Handoff
from state.record import state_key

HEADER_SOURCE_ORIGINAL = "hydrator.source.original"
# The headers the engine writes itself: one of each on a record that leaves.
ENGINE_HEADERS = frozenset(
    {
        HEADER_FILLED,
        HEADER_UNRESOLVED,
        HEADER_STALE,
        HEADER_ERROR,
        HEADER_SOURCE,
        HEADER_CHANGED,
        HEADER_RESELECTED,
        HEADER_RESELECTED_CURRENT,
    }
)


class Sink(Protocol):
    """Where a step's results go (the embedded engine: its open Kafka transaction)."""

    def output(self, input_topic: str, record: OutputRecord) -> None: ...

    def dead(self, record: OutputRecord) -> None: ...

    def handoff(self, partition: int, handoff: Handoff) -> None: ...


# A Kafka record to write: topic, partition, key, value, headers.
KafkaRecord = tuple[str, int, bytes | None, bytes | None, Headers]
# Where Kafka records go: a producer, or the rows a Spark group returns.
RecordWriter = Callable[[KafkaRecord], None]


def emit(
    step: Transition,
    input_topic: str,
    topology: Topology,
    sink: Sink,
    keep_local: Callable[[int, Handoff], bool] | None = None,
) -> int:
    """Send `step`'s results to `sink`; returns the bytes of its outputs' values. A handoff for
    which `keep_local(partition, handoff)` is true has been taken by a task of this process."""
    emitted = 0
    for record in step.emitted:
        sink.output(input_topic, leaving(record))
        emitted += len(record.value or b"")
    for dead in step.dead:
        sink.dead(leaving(dead.to_output()))
    for handoff in step.handoffs:
        target = topology.handoff_partition(handoff)
        if keep_local is None or not keep_local(target, handoff):
            sink.handoff(target, handoff)
    return emitted


def handoff_record(handoff: Handoff) -> tuple[bytes, bytes, Headers]:
    """A handoff record's key, value and headers (its source, which a dead letter made of a
    handoff too large for its topic keeps)."""
    key = state_key(handoff.topic, handoff.new_key)
    return key, handoff.encode(), ((HEADER_SOURCE, handoff.source.encode()),)


class TopicWriter:
    """The Sink that writes Kafka records to the topology's topics."""

    def __init__(self, topology: Topology, writer: RecordWriter) -> None:
        self._outputs = topology.outputs  # the Spark engine makes one per group: no copy
        self._dlq = topology.dlq_topic
        self._handoffs = topology.handoff_topic
        self._write = writer

    def output(self, input_topic: str, record: OutputRecord) -> None:
        topic = self._outputs[input_topic]
        self._write((topic, record.partition, record.key, record.value, record.headers))

    def dead(self, record: OutputRecord) -> None:
        self._write((self._dlq, record.partition, record.key, record.value, record.headers))

    def handoff(self, partition: int, handoff: Handoff) -> None:
        key, value, headers = handoff_record(handoff)
        self._write((self._handoffs, partition, key, value, headers))


def leaving(record: OutputRecord) -> OutputRecord:
    """`record` with one of each header the engine writes (see the module's note)."""
    headers = leaving_headers(record.headers)
    if headers is record.headers:
        return record
    return OutputRecord(record.partition, record.key, record.value, headers)


def leaving_headers(headers: Headers) -> Headers:
    """One of each header the engine writes: its own (the last), with an incoming
    `hydrator.source` kept as `hydrator.source.original`. `headers` itself when nothing repeats
    (every record passes here: the usual case is one loop over a few names)."""
    seen: set[str] = set()
    for name, _ in headers:
        if name in ENGINE_HEADERS:
            if name in seen:
                return _one_of_each(headers)
            seen.add(name)
    return headers


def _one_of_each(headers: Headers) -> Headers:
    last = {name: index for index, (name, _) in enumerate(headers) if name in ENGINE_HEADERS}
    has_original = any(name == HEADER_SOURCE_ORIGINAL for name, _ in headers)
    kept: list[tuple[str, bytes | None]] = []
    for index, (name, value) in enumerate(headers):
        if last.get(name, index) == index:
            kept.append((name, value))
        elif name == HEADER_SOURCE and not has_original:
            kept.append((HEADER_SOURCE_ORIGINAL, value))
            has_original = True
    return tuple(kept)
