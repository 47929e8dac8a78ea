"""Where the Spark engine's state goes: PySpark's applyInPandasWithState takes no initial state,
so a bootstrap writes each key's state record to the internal topic `<application-id>-bootstrap`
(compacted, keyed by the key's group `<input topic>\\x00<canonical key>`), which the query reads
beside its inputs as state-only records. The group function merges one into the key's state
before the key's inputs of the same micro-batch (images.merged): a bootstrapped row never
replaces a state the stream made, and the same row again changes nothing.

Spark's state store cannot be read from outside the query, so every row is written; the merge
happens where the state is.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from hydrator.bootstrap.embedded import BootstrapRefused
from hydrator.kafka.acknowledged_writer import AcknowledgedWriter
from hydrator.kafka.admin import ensure_topics, partition_counts
from hydrator.kafka.client_config import ClientSettings
from hydrator.kafka.partitioner import partition_for_key
from hydrator.seeding.bootstrap_topic import bootstrap_topic, bootstrap_topic_spec
from state.codec import encode_state
from state.record import StateRecord


class SparkState:
    def __init__(self, clients: ClientSettings, application_id: str, input_topic: str) -> None:
        self.clients = clients
        self.application_id = application_id
        self.input_topic = input_topic
        self.partitions = 0
        self._writer: AcknowledgedWriter | None = None
        self.written = 0
        self.kept = 0

    def open(self) -> int:
        admin = AdminClient(self.clients.admin())
        partitions = partition_counts(admin, [self.input_topic])[self.input_topic]
        if partitions is None:
            raise BootstrapRefused(f"--input-topic {self.input_topic}: the topic does not exist")
        self.partitions = partitions
        ensure_topics(admin, [bootstrap_topic_spec(self.application_id, partitions)])
        self._writer = AcknowledgedWriter(self.clients, "bootstrap records")
        return partitions

    def offer(self, key: str, route: bytes, record: StateRecord) -> bool:
        assert self._writer is not None
        group = f"{self.input_topic}\x00{key}".encode()
        partition = partition_for_key(route, self.partitions)
        topic = bootstrap_topic(self.application_id)
        self._writer.produce(topic, group, encode_state(record), partition)
        self.written += 1
        return True

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
