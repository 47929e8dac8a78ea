"""The true end of partitions: where a reader that has read everything there is would stand.

Two broker answers cannot be taken as they come:
* a read_committed client's high watermark is the last stable offset (and Tansu reports 0 for it
  while any transaction is open), so the probe reads uncommitted;
* Tansu answers ListOffsets(latest) with the base offset of the partition's last record batch,
  not the offset after its last record.
So the reported end is only a lower bound: the probe fetches from it and takes the end where the
fetch reports end-of-partition. Against Apache Kafka that is one empty fetch.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

TIMEOUT_S = 30.0


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
            }
        )

    def partitions(self, topic: str) -> list[int]:
        metadata = self._consumer.list_topics(topic, timeout=TIMEOUT_S).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        return sorted(metadata.partitions)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(low, end) of one partition."""
        low, _ = self._consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=TIMEOUT_S, cached=False
        )
        return low, self.ends([(topic, partition)])[(topic, partition)]

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
            low, reported = self._consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=TIMEOUT_S, cached=False
            )
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
                        ends[(msg.topic(), msg.partition())] = msg.offset()
                    else:
                        raise KafkaException(error)
        finally:
            self._consumer.unassign()
        return {tp: (lows[tp], end) for tp, end in ends.items()}

    def close(self) -> None:
        self._consumer.close()
