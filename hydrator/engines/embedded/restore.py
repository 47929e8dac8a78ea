"""Bring a task's local store up to date with its changelog partition before it processes.

The store remembers the changelog offset it reflects; only the records after it are replayed.
A store that has no such offset, or one the changelog does not have (the topic was recreated),
is wiped and rebuilt from the beginning. Records of a transaction that never committed are
skipped and their keys handed back for repair (see changelog.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from hydrator.engines.embedded import changelog
from hydrator.kafka.offsets import OffsetProbe
from state.stores.rocksdb import RocksDBStore

log = logging.getLogger(__name__)

BATCH = 10_000
STALL_WARNING_S = 10.0


class Restorer:
    def __init__(self, consumer_config: dict[str, Any], probe: OffsetProbe, topic: str) -> None:
        # read_committed: an aborted transaction's state must not come back.
        self._consumer = Consumer(
            {**consumer_config, "isolation.level": "read_committed", "enable.auto.commit": False}
        )
        self._probe = probe
        self._topic = topic

    def open(
        self, path: Path, partition: int, committed: Mapping[str, int]
    ) -> tuple[RocksDBStore, list[bytes]]:
        """The store of changelog partition `partition`, restored to the changelog's end, and
        the keys a dead transaction wrote, which the task must write again. `committed`: the
        group's committed offset of partition `partition` of each subscribed topic."""
        store = RocksDBStore(path)
        low, high = self._probe.watermarks(self._topic, partition)
        start = store.changelog_offset
        if start is None or not low <= start <= high:
            if start is not None or next(store.raw_items(), None) is not None:
                log.warning(
                    "%s-%d: local store at offset %s is outside the changelog [%d, %d]; rebuilding",
                    self._topic,
                    partition,
                    start,
                    low,
                    high,
                )
            store.close()
            RocksDBStore.destroy(path)
            store = RocksDBStore(path)
            start = low
        repairs: dict[bytes, None] = {}
        if start < high:
            began = time.monotonic()
            count = self._replay(store, partition, start, high, committed, repairs)
            log.info(
                "%s-%d: restored %d records (offsets %d..%d) in %.1f s%s",
                self._topic,
                partition,
                count,
                start,
                high,
                time.monotonic() - began,
                f"; {len(repairs)} keys of a transaction that never committed" if repairs else "",
            )
        return store, list(repairs)

    def _replay(
        self,
        store: RocksDBStore,
        partition: int,
        start: int,
        end: int,
        committed: Mapping[str, int],
        repairs: dict[bytes, None],
    ) -> int:
        tp = TopicPartition(self._topic, partition, start)
        self._consumer.assign([tp])
        changes: dict[bytes, bytes | None] = {}
        position = start
        # A dead transaction's records stay in the changelog: until the repairs are committed,
        # every restore must look at them again.
        first_dead: int | None = None
        count = 0
        last_progress = time.monotonic()
        try:
            while position < end:
                messages = self._consumer.consume(BATCH, 0.05)
                for msg in messages:
                    if msg.error():
                        raise KafkaException(msg.error())
                    key = msg.key()
                    if changelog.never_committed(msg.headers(), committed):
                        repairs[key] = None
                        if first_dead is None:
                            first_dead = msg.offset()
                        continue
                    repairs.pop(key, None)
                    changes[key] = msg.value()
                    count += 1
                reached = self._position(tp, position)
                if reached > position:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > STALL_WARNING_S:
                    # Only an open transaction holds a read_committed reader back: a dead
                    # instance's, until the broker times it out or the instance restarts with
                    # its state directory (Tansu never times it out).
                    log.warning(
                        "%s-%d: restore waits at offset %d for an open transaction to end",
                        self._topic,
                        partition,
                        position,
                    )
                    last_progress = time.monotonic()
                position = reached
                if changes and (len(changes) >= BATCH or position >= end):
                    store.apply(changes, position if first_dead is None else first_dead)
                    changes = {}
            store.apply(changes, position if first_dead is None else first_dead)
        finally:
            self._consumer.unassign()
        return count

    def _position(self, tp: TopicPartition, fallback: int) -> int:
        # The consumer's position also steps over transaction markers, which no message shows.
        (current,) = self._consumer.position([TopicPartition(tp.topic, tp.partition)])
        return current.offset if current.offset >= 0 else fallback

    def close(self) -> None:
        self._consumer.close()
