"""Where the embedded engine's state goes: its changelog `<application-id>-state`, partitioned
as the input is (a key's state in the partition its input records are in), from which every run
restores its local stores (hydrator/engines/embedded/restore.py). A run replays the records a
bootstrap appended at its next start; nothing else is touched.

The changelog is read first, so that a key the stream already wrote keeps its state
(images.merged) and a key bootstrapped before with the same row is not written again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from hydrator.errors import ConfigurationError
from hydrator.kafka.acknowledged_writer import AcknowledgedWriter
from hydrator.kafka.admin import ensure_topics, partition_counts
from hydrator.kafka.client_config import ClientSettings
from hydrator.kafka.partitioner import partition_for_key
from hydrator.kafka.topic_reader import read_to_end
from hydrator.seeding import images
from hydrator.topology.layout import Topology
from state.codec import StateFormatError, decode_state, encode_state
from state.large import is_store_key
from state.record import StateRecord, state_key

log = logging.getLogger(__name__)


class BootstrapRefused(ConfigurationError, ValueError):
    """The bootstrap cannot go ahead as asked (a usage problem: exit 2)."""


class EmbeddedState:
    def __init__(
        self,
        clients: ClientSettings,
        application_id: str,
        input_topic: str,
        partitioner: Callable[[bytes, int], int] = partition_for_key,
    ) -> None:
        """`partitioner`: where the input's producer puts a key (Kafka's default partitioner;
        CockroachDB's changefeed places keys its own way)."""
        self.partitioner = partitioner
        self.clients = clients
        self.application_id = application_id
        self.input_topic = input_topic
        self.partitions = 0
        self.topology: Topology | None = None
        self._existing: dict[bytes, bytes] = {}
        self._writer: AcknowledgedWriter | None = None
        self.written = 0
        self.kept = 0

    def open(self) -> int:
        """Check the topics, create the changelog if absent, read what it holds; the input's
        partition count."""
        admin = AdminClient(self.clients.admin())
        changelog = f"{self.application_id}-state"
        counts = partition_counts(admin, [self.input_topic, changelog])
        partitions = counts[self.input_topic]
        if partitions is None:
            raise BootstrapRefused(f"--input-topic {self.input_topic}: the topic does not exist")
        if counts[changelog] is not None and counts[changelog] != partitions:
            raise BootstrapRefused(
                f"--application-id: its changelog {changelog} has {counts[changelog]} "
                f"partitions but the input has {partitions}"
            )
        self.partitions = partitions
        self.topology = Topology(self.application_id, {self.input_topic: ""}, partitions)
        spec = next(s for s in self.topology.created_topics() if s.name == changelog)
        ensure_topics(admin, [spec])
        self._load(changelog)
        self._writer = AcknowledgedWriter(self.clients, "state records")
        return partitions

    def _load(self, changelog: str) -> None:
        prefix = state_key(self.input_topic, "")
        config = self.clients.consumer({"group.id": f"{self.application_id}-bootstrap"})
        for message in read_to_end(config, changelog):
            key = message.key()
            if key is None or not key.startswith(prefix) or is_store_key(key):
                continue
            value = message.value()
            if value is None:
                self._existing.pop(key, None)
            else:
                self._existing[key] = value

    def offer(self, key: str, route: bytes, record: StateRecord) -> bool:
        """Write `record` as the state of canonical key `key` (raw Kafka key `route`) unless
        the stored state is kept (images.merged); whether it was written."""
        assert self._writer is not None and self.topology is not None
        store_key = state_key(self.input_topic, key)
        existing = self._existing.get(store_key)
        current = None
        if existing is not None:
            try:
                current = decode_state(existing)
            except StateFormatError:
                current = None  # the run would skip it too: a bootstrap row is better
        chosen = images.merged(current, record)
        if chosen is None:
            self.kept += 1
            return False
        encoded = encode_state(chosen)
        self._existing[store_key] = encoded
        partition = self.partitioner(route, self.partitions)
        self._writer.produce(self.topology.changelog_topic, store_key, encoded, partition)
        self.written += 1
        return True

    def close(self) -> None:
        """Wait until every record is acknowledged; raises if any was not."""
        if self._writer is not None:
            self._writer.close()
