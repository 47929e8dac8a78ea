"""What each changelog record says about the transaction that wrote it.

A broker that honours transactions hides an aborted or dead transaction's changelog records from
the read_committed restore. Tansu does not: a killed instance's last batch stays visible, and
state restored from it would be ahead of the committed input offsets. So every changelog record
carries the input positions its transaction commits for the task (topic -> next offset of
partition `p`). At restore, a record whose positions are past the group's committed offsets
belongs to a transaction that never committed: it is skipped, and its key is written again with
its committed value in the task's first transaction, so that a later restore from the
beginning of the changelog meets the correction after the dead record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import orjson
from confluent_kafka import TopicPartition

HEADER = "hydrator.offsets"
Headers = list[tuple[str, bytes]] | None


def positions_by_partition(positions: Iterable[TopicPartition]) -> dict[int, bytes]:
    """The header value for each task partition: what its records' transaction commits."""
    by_partition: dict[int, dict[str, int]] = {}
    for tp in positions:
        by_partition.setdefault(tp.partition, {})[tp.topic] = tp.offset
    return {p: orjson.dumps(offsets) for p, offsets in by_partition.items()}


def committed_by_partition(committed: Iterable[TopicPartition]) -> dict[int, dict[str, int]]:
    """The group's committed offsets, per partition number (absent ones left out)."""
    by_partition: dict[int, dict[str, int]] = {}
    for tp in committed:
        if tp.offset >= 0:
            by_partition.setdefault(tp.partition, {})[tp.topic] = tp.offset
    return by_partition


def never_committed(headers: Headers, committed: Mapping[str, int]) -> bool:
    """The record's transaction moved some input past what the group has committed: it died.
    Records without the header (an older release) count as committed."""
    for name, value in headers or ():
        if name == HEADER and value is not None:
            positions: dict[str, int] = orjson.loads(value)
            return any(offset > committed.get(topic, -1) for topic, offset in positions.items())
    return False
