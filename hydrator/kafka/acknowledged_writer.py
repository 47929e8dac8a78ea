"""The producer a bootstrap writes its state records with: idempotent, and closed only once
every record is acknowledged."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, Producer

from hydrator.kafka.client_config import ClientSettings


class AcknowledgedWriter:
    def __init__(self, clients: ClientSettings, what: str) -> None:
        """`what` names the records in an error ("state records")."""
        self._producer: Producer | None = Producer(
            clients.producer({"enable.idempotence": True, "linger.ms": 20})
        )
        self._what = what
        self._errors: list[str] = []

    def produce(self, topic: str, key: bytes, value: bytes, partition: int) -> None:
        assert self._producer is not None, "produce after close"

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                self._errors.append(str(err))

        while True:
            try:
                self._producer.produce(topic, value, key, partition, on_delivery=delivered)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def close(self) -> None:
        """Wait until every record is acknowledged; raises if any was not."""
        if self._producer is not None:
            remaining = self._producer.flush(120)
            self._producer = None
            if remaining:
                raise KafkaException(f"{remaining} {self._what} not acknowledged")
        if self._errors:
            raise KafkaException(f"{self._what} not written: {self._errors[0]}")
