"""The internal topic the Spark engine's seeded states travel in, `<application-id>-bootstrap`
(compacted, keyed by the key's group `<input topic>\\x00<canonical key>`): `hydrator state
bootstrap` writes it (hydrator/bootstrap/spark.py), the engine creates it and reads it beside
its inputs (hydrator/engines/spark/)."""

from __future__ import annotations

from hydrator.kafka.admin import TopicSpec
from hydrator.kafka.record_limits import TopicLimits
from hydrator.topology.layout import internal_topic

MAX_RECORD_BYTES = 64 * 1024 * 1024


def bootstrap_topic(application_id: str) -> str:
    return internal_topic(application_id, "bootstrap")


def bootstrap_topic_spec(application_id: str, partitions: int) -> TopicSpec:
    limit = TopicLimits.for_max_record_bytes(MAX_RECORD_BYTES).changelog
    return TopicSpec(
        bootstrap_topic(application_id),
        partitions,
        {"cleanup.policy": "compact", "max.message.bytes": str(limit)},
    )
