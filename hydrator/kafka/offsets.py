"""The true end of partitions: where a reader that has read everything there is would stand.

Two broker answers cannot be taken as they come:
* a read_committed client's high watermark is the last stable offset (and Tansu reports 0 for it
  while any transaction is open), so the probe reads uncommitted;
* Tansu answers ListOffsets(latest) with the base offset of the partition's last record batch,
  not the offset after its last record.
So the reported end is only a lower bound: the probe fetches from it and takes the end where the
fetch reports end-of-partition. Against Apache Kafka that is one empty fetch.

The low watermark needs the same care: Tansu answers ListOffsets(earliest) with the base offset of
the batch it *stored* first, which is not the lowest one when producers wrote the partition at the
same time. Where the answer is above 0, the probe fetches from offset 0: the first record that
comes is where the partition starts. Below a real log start (retention) that fetch is out of range
and the answer stands.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from hydrator.kafka import consumed
from hydrator.kafka.broker_quirks import FIRST_OFFSET

TIMEOUT_S = 30.0
# Answers to a fetch from offset 0 that leave the listed low watermark standing: nothing is there,
# or offset 0 is below the log start.
_AT_THE_EDGE = (
    KafkaError._PARTITION_EOF,
    KafkaError._AUTO_OFFSET_RESET,
    KafkaError.OFFSET_OUT_OF_RANGE,
)


# Answers that mean a partition's leader is not known yet, here or at the broker.
_LEADERLESS = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._UNKNOWN_PARTITION,
)
# A leader is elected within seconds; a partition unknown for longer is gone (a deleted topic).
LEADER_WAIT_S = 10.0


def _leader_unknown(error: object) -> bool:
    return isinstance(error, KafkaError) and error.code() in _LEADERLESS


class OffsetProbe:
    def __init__(self, config: dict[str, Any]) -> None:
        # No subscription and no commits: the group id is only required by the client.
        self._consumer = Consumer(
            {
                **config,
                "isolation.level": "read_uncommitted",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                # A fetch below the log start must say so, not move to where ListOffsets says.
                "auto.offset.reset": "error",
            }
        )

    def partitions(self, topic: str) -> list[int]:
        metadata = self._consumer.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        return sorted(metadata.partitions)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(low, end) of one partition."""
        return self.bounds([(topic, partition)])[(topic, partition)]

    def ends(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: end for tp, (_, end) in self.bounds(partitions).items()}

    def bounds(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(low watermark, end) of each partition."""
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        start = []
        lows: dict[tuple[str, int], int] = {}
        for topic, p in wanted:
            low, reported = self._listed(TopicPartition(topic, p))
            lows[(topic, p)] = low
            start.append(TopicPartition(topic, p, max(low, reported)))
        ends: dict[tuple[str, int], int] = {}
        self._consumer.assign(start)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while len(ends) < len(wanted):
                if time.monotonic() > deadline:
                    missing = [tp for tp in wanted if tp not in ends]
                    raise TimeoutError(f"no end-of-partition for {missing}")
                for msg in self._consumer.consume(10_000, 0.05):
                    error = msg.error()
                    if error is None:
                        continue
                    if error.code() == KafkaError._PARTITION_EOF:
                        ends[(consumed.topic(msg), consumed.partition(msg))] = consumed.offset(msg)
                    else:
                        raise KafkaException(error)
        finally:
            self._consumer.unassign()
        lows.update(self.first_offsets({tp: low for tp, low in lows.items() if low > 0}))
        return {tp: (lows[tp], end) for tp, end in ends.items()}

    def _listed(self, tp: TopicPartition) -> tuple[int, int]:
        """ListOffsets(earliest, latest) of one partition, asked again while its leader is not
        known yet (a topic just created, a broker just restarted: Apache Kafka answers
        NOT_LEADER_FOR_PARTITION, the client's metadata an unknown partition)."""
        deadline = time.monotonic() + LEADER_WAIT_S
        while True:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    tp, timeout=TIMEOUT_S, cached=False
                )
                return low, high
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if not _leader_unknown(error) or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def first_offsets(self, listed: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Where each partition starts, given ListOffsets(earliest) answers that may be too high
        (the module's note): for those above 0, the first record a fetch from 0 gives."""
        if not listed:
            return {}
        first = dict(listed)
        answered: set[tuple[str, int]] = set()
        self._consumer.assign([TopicPartition(topic, p, 0) for topic, p in listed])
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while len(answered) < len(listed):
                if time.monotonic() > deadline:
                    missing = [tp for tp in listed if tp not in answered]
                    raise TimeoutError(f"no answer to a fetch from offset 0 of {missing}")
                for msg in self._consumer.consume(len(listed), 0.05):
                    tp = (consumed.topic(msg), consumed.partition(msg))
                    if tp not in listed or tp in answered:
                        continue
                    error = msg.error()
                    if error is None:
                        first[tp] = min(listed[tp], consumed.offset(msg))
                    elif error.code() not in _AT_THE_EDGE:
                        raise KafkaException(error)
                    answered.add(tp)
        finally:
            self._consumer.unassign()
        return first

    def close(self) -> None:
        self._consumer.close()


def topic_ends(config: dict[str, Any], topic: str) -> dict[int, int]:
    """The true end of every partition of `topic`, by partition number in order, found by a
    probe of its own (configured by `config`, a consumer's)."""
    probe = OffsetProbe(config)
    try:
        partitions = probe.partitions(topic)
        ends = probe.ends((topic, p) for p in partitions)
    finally:
        probe.close()
    return {p: ends[(topic, p)] for p in partitions}


def from_the_start(topic: str, partitions: Iterable[int]) -> list[TopicPartition]:
    """Positions that read every record of `partitions`, for a consumer whose
    `auto.offset.reset` is earliest: offset 0, not OFFSET_BEGINNING, which is resolved through
    ListOffsets(earliest) and so lands too far on Tansu (see the module's note). Below a real log
    start the consumer's reset takes over."""
    return [TopicPartition(topic, p, FIRST_OFFSET) for p in partitions]
