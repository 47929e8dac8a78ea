"""The dead-letter topic of an application, and where a replay stands in it.

A replay's progress is the application's consumer group's committed offset of each dead-letter
partition, committed in the replay's transactions with what it wrote. A replay works up to the
topic's end as it stood when it started (its goal), so that it never reads what it wrote itself
(dead letters that failed again, dead letters left for later). The goal is kept with the offset,
as the offset commit's metadata, until the replay is done: a replay that is killed and started
again works to the same goal, and reads nothing of what its predecessor wrote. A partition whose
committed offset has no goal gets the end as it stands now.

(Tansu drops offset-commit metadata: there, a replay started again after a crash takes its
predecessor's dead letters too: each that fails again is dead-lettered once more.)
"""

from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient

from hydrator.kafka.admin import partition_counts, topic_names
from hydrator.names import did_you_mean
from hydrator.topology.layout import TopologyError, internal_topic

_GOAL = "hydrator.dlq-replay.goal"


def goal_metadata(goal: int | None) -> str:
    """The offset commit's metadata that keeps a replay's goal (None: no replay under way)."""
    return json.dumps({_GOAL: goal}) if goal is not None else ""


def goal_of(metadata: str | None) -> int | None:
    """The goal an unfinished replay kept in an offset commit's metadata; None when none."""
    if not metadata:
        return None
    try:
        goal = json.loads(metadata).get(_GOAL)
    except (ValueError, AttributeError):
        return None
    return goal if type(goal) is int and goal >= 0 else None


def dead_letter_partitions(admin: AdminClient, application_id: str) -> int:
    """The partition count of the application's dead-letter topic, which must exist: an id
    without one never ran (or is mistyped), and a replay must not create topics for it."""
    topic = internal_topic(application_id, "dlq")
    count = partition_counts(admin, [topic])[topic]
    if count is None:
        known = [name.removesuffix("-dlq") for name in topic_names(admin) if name.endswith("-dlq")]
        meant = did_you_mean(application_id, known)
        raise TopologyError(
            f"--application-id {application_id}: its dead-letter topic {topic} does not exist, "
            f"so there is nothing to replay{meant}"
        )
    return count
