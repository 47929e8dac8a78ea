"""What each changelog record says about the transaction that wrote it.

A broker that honours transactions hides an aborted or dead transaction's changelog records from
the read_committed restore. Tansu does not: a killed instance's last batch stays visible, and
state restored from it would be ahead of the committed input offsets. So a restore must tell a
dead transaction's records from a committed one's, and give every record of one transaction the
same verdict: a batch changes the state of tasks whose own input did not move (a key change
hands the old image to the task of the new key within the process, and that task may release
records parked there), so a verdict per task would undo a dead batch in some tasks and keep it
in others, and a handoff undone at its source but kept at its target is never sent again.

Every changelog record of a transaction carries the same witness: one input position the
transaction commits and no earlier transaction committed (`WITNESS`, topic, partition and next
offset). The transaction died exactly when the group's committed offset of that partition is
short of it. A transaction that moves no input (only timers fired) has no witness; its records
carry the positions it commits for their own task (`HEADER`, topic -> next offset of partition
`p`), which equal the committed ones, so they count as committed in every task alike. Records
of an older release carry only `HEADER` (judged by it) or nothing (committed).

A dead transaction's records are skipped, and their keys written again with their committed
values in the task's first transaction, so that a later restore from the beginning of the
changelog, once the committed offsets have moved past the witness, meets the correction after
the dead record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import orjson
from confluent_kafka import TopicPartition

from hydrator.errors import HydratorError

HEADER = "hydrator.offsets"
WITNESS = "hydrator.witness"
Headers = list[tuple[str, bytes]] | None
_NONE: Mapping[str, int] = MappingProxyType({})


class CommittedOffsets:
    """The group's committed offsets as this instance knows them: read at each assignment (for
    every partition of every subscribed topic, since a witness may name any), moved by each of
    its own commits."""

    def __init__(self, committed: Iterable[TopicPartition] = ()) -> None:
        # partition number -> topic -> offset: a restore asks by partition, once per record
        self._by_partition: dict[int, dict[str, int]] = {}
        self.load(committed)

    def load(self, committed: Iterable[TopicPartition]) -> None:
        """Take these as the group's committed offsets (absent ones, offset < 0, as none)."""
        for tp in committed:
            topics = self._by_partition.setdefault(tp.partition, {})
            if tp.offset >= 0:
                topics[tp.topic] = tp.offset
            else:
                topics.pop(tp.topic, None)

    def of(self, topic: str, partition: int) -> int:
        """The committed offset of one partition; -1 when none is."""
        return self.partition(partition).get(topic, -1)

    def partition(self, partition: int) -> Mapping[str, int]:
        """The committed offsets of partition number `partition` of each topic that has one."""
        return self._by_partition.get(partition, _NONE)

    def witness(self, positions: Iterable[TopicPartition]) -> TopicPartition | None:
        """A position of `positions` past the committed one: the witness of the transaction
        that commits them (None when they move nothing)."""
        for tp in positions:
            if tp.offset > self.of(tp.topic, tp.partition):
                return tp
        return None


def headers_by_partition(
    partitions: Iterable[int],
    positions: Iterable[TopicPartition],
    witness: TopicPartition | None,
) -> dict[int, list[tuple[str, bytes]]]:
    """The headers of the records a transaction committing `positions` writes to each of the
    changelog `partitions`: the transaction's witness, and the positions it commits for the
    task's own input partitions (a task that has read none of them this run has none)."""
    own: dict[int, dict[str, int]] = {}
    for tp in positions:
        own.setdefault(tp.partition, {})[tp.topic] = tp.offset
    shared = []
    if witness is not None:
        shared = [(WITNESS, orjson.dumps([witness.topic, witness.partition, witness.offset]))]
    return {
        p: [(HEADER, orjson.dumps(own[p])), *shared] if p in own else shared for p in partitions
    }


def never_committed(headers: Headers, committed: CommittedOffsets, partition: int) -> bool:
    """Whether the transaction that wrote a record of changelog partition `partition` died.
    Raises UnreadableHeader for a header that cannot be read."""
    own: dict[str, int] | None = None
    for name, value in headers or ():
        if name == WITNESS and value is not None:
            topic, number, offset = _read(name, value, _is_witness)
            return offset > committed.of(topic, number)
        if name == HEADER and value is not None:
            own = _read(name, value, _is_positions)
    if own is None:
        return False
    mine = committed.partition(partition)
    return any(offset > mine.get(topic, -1) for topic, offset in own.items())


class UnreadableHeader(HydratorError, ValueError):
    pass


def _read(name: str, value: bytes, valid: Callable[[Any], bool]) -> Any:
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise UnreadableHeader(f"unreadable {name} header ({exc})") from exc
    if not valid(decoded):
        raise UnreadableHeader(f"unreadable {name} header ({value[:100]!r})")
    return decoded


def _is_witness(decoded: Any) -> bool:
    return (
        type(decoded) is list
        and len(decoded) == 3
        and type(decoded[0]) is str
        and type(decoded[1]) is int
        and type(decoded[2]) is int
    )


def _is_positions(decoded: Any) -> bool:
    return type(decoded) is dict and all(type(v) is int for v in decoded.values())
