"""Topic administration the engines need: partition counts, create-if-absent and size limits."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)
    # -1 lets the broker pick its default.replication.factor (KIP-464).
    replication_factor: int = -1


def partition_counts(
    admin: AdminClient, topics: Iterable[str], timeout_s: float = DEFAULT_TIMEOUT_S
) -> dict[str, int | None]:
    """Partition count per topic; None for a topic that does not exist."""
    metadata = admin.list_topics(timeout=timeout_s)
    counts: dict[str, int | None] = {}
    for name in topics:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            counts[name] = None
        else:
            counts[name] = len(topic.partitions)
    return counts


def ensure_topics(
    admin: AdminClient, specs: Iterable[TopicSpec], timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """Create the topics that do not exist yet; returns the names created.

    Another instance may create the same topic at the same moment, so "already exists" is success.
    """
    specs = list(specs)
    existing = partition_counts(admin, [s.name for s in specs], timeout_s)
    missing = [s for s in specs if existing[s.name] is None]
    if not missing:
        return []
    futures = admin.create_topics(
        [
            NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.config))
            for s in missing
        ],
        request_timeout=timeout_s,
    )
    created = []
    for name, future in futures.items():
        try:
            future.result()
            created.append(name)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    _wait_visible(admin, [s.name for s in missing], timeout_s)
    return created


def max_message_bytes(
    admin: AdminClient, topics: Iterable[str], timeout_s: float = DEFAULT_TIMEOUT_S
) -> dict[str, int | None]:
    """Each topic's `max.message.bytes` (DescribeConfigs); None where the broker does not say
    (Tansu answers with no entries)."""
    names = list(dict.fromkeys(topics))
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, request_timeout=timeout_s)
    limits: dict[str, int | None] = {}
    for resource, future in futures.items():
        try:
            entry = future.result(timeout_s).get("max.message.bytes")
        except KafkaException:
            entry = None
        value = entry.value if entry is not None else None
        limits[resource.name] = int(value) if value and value.isdigit() else None
    return limits


def _wait_visible(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """Creation is asynchronous on some brokers: wait until metadata lists every partition."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = partition_counts(admin, names, timeout_s)
        if all(counts[n] is not None for n in names):
            return
        if time.monotonic() > deadline:
            absent = [n for n in names if counts[n] is None]
            raise TimeoutError(f"topics not visible after creation: {', '.join(absent)}")
        time.sleep(0.1)
