"""The size check in front of the batch transaction: a record too large for its topic becomes a
dead letter, and a dead letter too large for the dead-letter topic is truncated, before either
reaches the producer (see hydrator/kafka/record_limits.py)."""

from __future__ import annotations

from hydrator.core.records import OutputRecord
from hydrator.engines.embedded.counts import RunCounts
from hydrator.kafka.record_limits import Produced, RecordLimits
from hydrator.topology.emit import Sink, handoff_record
from hydrator.topology.layout import Topology
from state.handoff import Handoff


class SizeCheckedSink:
    def __init__(
        self, sink: Sink, limits: RecordLimits, topology: Topology, counts: RunCounts
    ) -> None:
        self._sink = sink
        self._limits = limits
        self._outputs = dict(topology.outputs)
        self._handoff_topic = topology.handoff_topic
        self._counts = counts

    def output(self, input_topic: str, record: OutputRecord) -> None:
        topic = self._outputs[input_topic]
        if self._limits.fits(topic, record.key, record.value, record.headers):
            self._sink.output(input_topic, record)
            return
        checked = self._limits.check(topic, record.key, record.value, record.headers)
        if checked.dead:
            self._oversize(input_topic, record.partition, checked)
        else:
            self._sink.output(input_topic, record)

    def dead(self, record: OutputRecord) -> None:
        checked = self._limits.check(
            self._limits.dlq_topic, record.key, record.value, record.headers
        )
        self._sink.dead(_record(record.partition, checked))

    def handoff(self, partition: int, handoff: Handoff) -> None:
        key, value, headers = handoff_record(handoff)
        checked = self._limits.check(self._handoff_topic, key, value, headers)
        if checked.dead:
            # The new key then waits for --handoff-timeout, as for a lost DELETE.
            self._oversize(handoff.topic, partition, checked)
        else:
            self._sink.handoff(partition, handoff)

    def _oversize(self, input_topic: str, partition: int, checked: Produced) -> None:
        counts = self._counts.batch(input_topic)
        counts["dead_letters"] += 1
        counts["oversize_records"] += 1
        self._sink.dead(_record(partition, checked))


def _record(partition: int, produced: Produced) -> OutputRecord:
    return OutputRecord(partition, produced.key, produced.value, tuple(produced.headers or ()))
