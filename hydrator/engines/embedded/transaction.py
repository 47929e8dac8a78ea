"""The batch transaction: outputs, handoffs, dead letters, state changelog and input offsets
commit together through one transactional producer (Kafka's EOS v2 layout: one producer per
instance, fenced by the consumer group's generation)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from hydrator.engines.embedded import changelog
from hydrator.engines.embedded.watchdog import blocking
from hydrator.errors import TemporaryFailure
from hydrator.topology.emit import KafkaRecord
from hydrator.topology.layout import Topology

log = logging.getLogger(__name__)

TIMEOUT_S = 60.0


class TransactionFailed(TemporaryFailure, RuntimeError):
    """The batch could not be committed; it has been aborted (or the producer is fenced)."""


class TransactionalWriter:
    def __init__(self, producer: Producer, topology: Topology) -> None:
        self._producer = producer
        self._topology = topology
        self.in_transaction = False
        self.records = 0  # produced in the open transaction

    def init(self) -> None:
        # Also aborts whatever a previous incarnation with the same transactional id left open.
        with blocking("init_transactions", TIMEOUT_S):
            self._producer.init_transactions(TIMEOUT_S)

    def begin(self) -> None:
        if not self.in_transaction:
            self._producer.begin_transaction()
            self.in_transaction = True
            self.records = 0

    # -- the RecordWriter a task's records reach (through hydrator/topology/emit.TopicWriter) ---

    def write(self, record: KafkaRecord) -> None:
        topic, partition, key, value, headers = record
        self._produce(topic, partition, key, value, list(headers) or None)

    def write_at(self, record: KafkaRecord, timestamp_ms: int) -> None:
        """`write`, with the record's timestamp given (a record copied as it was)."""
        topic, partition, key, value, headers = record
        self._produce(topic, partition, key, value, list(headers) or None, None, timestamp_ms)

    def serve_deliveries(self) -> None:
        """Let librdkafka free what the broker has acknowledged: a produced record is kept, its
        bytes with it, until its delivery report is served, and a long commit interval would
        otherwise keep every output of the open transaction in memory until the commit."""
        self._producer.poll(0)

    def send_now(self) -> None:
        """Send what lingers without waiting for it (a flush that returns at once)."""
        self._producer.flush(0)

    # -- commit ------------------------------------------------------------------------------

    def commit(
        self,
        changes: Mapping[int, Mapping[bytes, bytes | None]],
        offsets: list[TopicPartition],
        group_metadata: Any,
        witness: TopicPartition | None = None,
    ) -> dict[int, int]:
        """Commit the batch; returns, per changelog partition written, the offset after its last
        record (where a restore of that partition resumes). `witness`: the position of `offsets`
        that tells whether the transaction committed (changelog.py)."""
        self.begin()
        try:
            # Outputs and changelog are delivered (one flush) before the offsets are sent, so a
            # broker that honours transactions loosely (Tansu) can never show input as done
            # whose outputs or state are missing. Between outputs and changelog no order is
            # needed: a restore skips the changelog records of a transaction whose offsets never
            # committed (changelog.py), whatever of its outputs arrived.
            written: dict[int, int] = {}

            def delivered(err: KafkaError | None, msg: Any) -> None:
                if err is None:
                    written[msg.partition()] = msg.offset() + 1

            topic = self._topology.changelog_topic
            tags = changelog.headers_by_partition(changes, offsets, witness)
            for partition, encoded in changes.items():
                headers = tags[partition] or None
                # The idempotent producer keeps a partition's records in order, so the last one
                # carries the partition's highest offset: one delivery report per partition
                # instead of one per record (a failure of any record fails the commit anyway).
                records = list(encoded.items())
                for key, data in records[:-1]:
                    self._produce(topic, partition, key, data, headers)
                for key, data in records[-1:]:
                    self._produce(topic, partition, key, data, headers, delivered)
            self._flush()
            if offsets:
                with blocking("send_offsets_to_transaction", TIMEOUT_S):
                    self._producer.send_offsets_to_transaction(offsets, group_metadata, TIMEOUT_S)
            with blocking("commit_transaction", TIMEOUT_S):
                self._producer.commit_transaction(TIMEOUT_S)
        except KafkaException as exc:
            self._fail(exc)
        self.in_transaction = False
        missing = [p for p, encoded in changes.items() if encoded and p not in written]
        if missing:
            raise TransactionFailed(f"no delivery report for changelog partitions {missing}")
        return written

    def abort(self) -> None:
        if not self.in_transaction:
            return
        try:
            with blocking("abort_transaction", TIMEOUT_S):
                self._producer.abort_transaction(TIMEOUT_S)
        except KafkaException as exc:
            log.warning("abort failed: %s", exc)
        self.in_transaction = False

    # -- internals ---------------------------------------------------------------------------

    def _produce(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        on_delivery: Any = None,
        timestamp_ms: int = 0,
    ) -> None:
        """`timestamp_ms` 0: the time of producing."""
        if not self.in_transaction:
            self.begin()
        self.records += 1
        while True:
            try:
                self._producer.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    # the stub's invariant List refuses (str, bytes) pairs; librdkafka reads them
                    headers=headers,  # type: ignore[arg-type]
                    on_delivery=on_delivery,
                    timestamp=timestamp_ms,
                )
                return
            except BufferError:
                # The local queue is full: let deliveries drain it.
                self._producer.poll(0.05)

    def _flush(self) -> None:
        with blocking("flush", TIMEOUT_S):
            remaining = self._producer.flush(TIMEOUT_S)
        if remaining:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{remaining} undelivered"))

    def _fail(self, exc: KafkaException) -> None:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.fatal():
            self.in_transaction = False  # fenced: nothing more can be done with this producer
        else:
            self.abort()
        raise TransactionFailed(str(exc)) from exc
