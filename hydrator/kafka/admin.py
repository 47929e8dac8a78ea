"""Topic administration the engines need: partition counts, create-if-absent and size limits;
and whether a consumer group (an application) has members."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConsumerGroupDescription,
    NewTopic,
    ResourceType,
    TopicMetadata,
)

log = logging.getLogger(__name__)

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


def missing_topics(
    admin: AdminClient, topics: Iterable[str], timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """Those of `topics` that do not exist."""
    return [
        name for name, count in partition_counts(admin, topics, timeout_s).items() if count is None
    ]


def topic_names(admin: AdminClient, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """The topics on the broker, but its own (`__consumer_offsets`...)."""
    return sorted(n for n in admin.list_topics(timeout=timeout_s).topics if not n.startswith("__"))


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
    wait_until_led(admin, [s.name for s in missing], timeout_s)
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


def wait_until_led(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """Creation is asynchronous: the controller has a new topic before the brokers' metadata
    lists it, and a partition is listed before it has a leader (Apache Kafka answers requests
    for it with NOT_LEADER_FOR_PARTITION until then). Wait until every partition has one."""
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = admin.list_topics(timeout=timeout_s).topics
        waiting = [name for name in names if not _led(metadata.get(name))]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics without a leader after creation: {', '.join(waiting)}")
        time.sleep(0.1)


def _led(topic: TopicMetadata | None) -> bool:
    return (
        topic is not None
        and topic.error is None
        and bool(topic.partitions)
        and all(p.error is None and p.leader >= 0 for p in topic.partitions.values())
    )


_ACTIVE = (
    ConsumerGroupState.STABLE,
    ConsumerGroupState.PREPARING_REBALANCING,
    ConsumerGroupState.COMPLETING_REBALANCING,
)


def group_is_active(
    admin: AdminClient | dict[str, Any], group: str, timeout_s: float = 30.0
) -> bool:
    """Whether the consumer group `group` has members now. Judged by the members the broker
    lists and by the group's state: Tansu lists none, but says STABLE while a member is in (and
    after: it keeps saying so once its members' sessions have expired). `admin`: a client, or
    the configuration of one to make."""
    description = _described(admin, group, timeout_s)
    if description is None:
        return False
    return bool(description.members) or description.state in _ACTIVE


def group_members(admin: AdminClient | dict[str, Any], group: str, timeout_s: float = 30.0) -> int:
    """How many members the broker lists in the consumer group `group` (Tansu lists none)."""
    description = _described(admin, group, timeout_s)
    return len(description.members) if description is not None else 0


def _described(
    admin: AdminClient | dict[str, Any], group: str, timeout_s: float
) -> ConsumerGroupDescription | None:
    """The group as the broker describes it; None when it cannot say."""
    where = ""
    if isinstance(admin, dict):
        where = f" at {admin['bootstrap.servers']}"
        admin = AdminClient(admin)
    futures = admin.describe_consumer_groups([group], request_timeout=timeout_s)
    try:
        return futures[group].result(timeout_s)
    except KafkaException as exc:
        log.debug("describe group %s: %s", group, exc)
        return None
    except TimeoutError:  # its own message is empty
        raise TimeoutError(
            f"no answer within {timeout_s:.0f} s from the broker{where} on whether consumer "
            f"group {group} has members"
        ) from None
