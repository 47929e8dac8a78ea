"""`hydrator dlq replay --dry-run`: what a replay would do with each dead letter, counted by
source topic and error kind; nothing is written and no consumer group is joined (the group's
committed offsets are only read)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from hydrator.dlq.selection import Leave, Replay, Selection, judge
from hydrator.dlq.topic import goal_of
from hydrator.kafka import consumed
from hydrator.kafka.consumed import raw_record
from hydrator.kafka.offsets import OffsetProbe
from hydrator.topology.layout import internal_topic

TIMEOUT_S = 30.0
# A read that stops moving this long (an open transaction holds it back) gives up.
STALL_S = 60.0

Tally = Counter[tuple[str, str]]  # (source topic, error kind) -> records


@dataclass
class DryRun:
    """What a replay would do, from `starts` (the replay's position) to `goals` (per partition)."""

    topic: str
    selection: Selection
    starts: dict[int, int] = field(default_factory=dict)
    goals: dict[int, int] = field(default_factory=dict)
    replay: Tally = field(default_factory=Counter)
    leave: Tally = field(default_factory=Counter)
    unreplayable: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def render(self) -> str:
        read = sum(self.replay.values()) + sum(self.leave.values())
        read += sum(self.unreplayable.values())
        spans = ", ".join(f"{p}: {self.starts[p]}-{self.goals[p]}" for p in sorted(self.goals))
        lines = [
            f"{read} dead letters in {self.topic} from the replay's position to its end "
            f"(offsets {spans}); nothing written (--dry-run)",
            f"would replay {sum(self.replay.values())} ({self.selection.describe()}):",
            *_table({(topic, kind): n for (topic, kind), n in self.replay.items()}),
            f"would leave {sum(self.leave.values())} for a later replay (copied to the end of "
            f"{self.topic}):",
            *_table(self.leave),
            f"not replayable {sum(self.unreplayable.values())} (left where they are):",
            *_table({(t, f"{k}: {why}"): n for (t, k, why), n in self.unreplayable.items()}),
        ]
        return "\n".join(lines) + "\n"


def dry_run(
    consumer_config: dict[str, Any],
    application_id: str,
    inputs: Collection[str],
    partitions: int,
    selection: Selection,
) -> DryRun:
    """Read the application's dead-letter topic (of `partitions` partitions) from the replay's
    position to its goal and judge each record as a replay would."""
    topic = internal_topic(application_id, "dlq")
    result = DryRun(topic, selection)
    # The group id only to read the replay's committed position: no consumer here joins it.
    consumer_config = {**consumer_config, "group.id": application_id}
    probe = OffsetProbe(consumer_config)
    try:
        bounds = probe.bounds((topic, p) for p in range(partitions))
    finally:
        probe.close()
    consumer = Consumer(
        {
            **consumer_config,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        for tp in consumer.committed(tps, TIMEOUT_S):
            low, end = bounds[(topic, tp.partition)]
            start = tp.offset if tp.offset >= 0 else low
            result.starts[tp.partition] = start
            result.goals[tp.partition] = max(goal_of(tp.metadata) or end, start)
        for message in _read(consumer, topic, result.starts, result.goals):
            verdict = judge(raw_record(message), selection, inputs, application_id, partitions)
            if isinstance(verdict, Replay):
                result.replay[(verdict.topic, verdict.kind)] += 1
            elif isinstance(verdict, Leave):
                result.leave[(verdict.topic, verdict.kind)] += 1
            else:
                result.unreplayable[(verdict.topic, verdict.kind, verdict.why)] += 1
    finally:
        consumer.close()
    return result


def _read(
    consumer: Consumer, topic: str, starts: dict[int, int], goals: dict[int, int]
) -> Iterator[Message]:
    """The committed records of `topic` from `starts` to `goals`, partition by partition. A
    partition is done when the read_committed position reaches its goal (the last offsets are
    transaction markers that no message shows)."""
    for partition in sorted(starts):
        goal = goals[partition]
        if starts[partition] >= goal:
            continue
        consumer.assign([TopicPartition(topic, partition, starts[partition])])
        position, moved = starts[partition], time.monotonic()
        while position < goal:
            for message in consumer.consume(1000, 0.1):
                if message.error():
                    raise KafkaException(message.error())
                if consumed.offset(message) < goal:
                    yield message
            (current,) = consumer.position([TopicPartition(topic, partition)])
            if current.offset > position:
                position, moved = current.offset, time.monotonic()
            elif time.monotonic() - moved > STALL_S:
                raise TimeoutError(
                    f"{topic}-{partition}: no progress past offset {position} in {STALL_S:.0f} s "
                    "(an open transaction?)"
                )
        consumer.unassign()


def _table(counts: dict[tuple[str, str], int] | Counter[tuple[str, str]]) -> list[str]:
    """`  topic  kind  n` rows, most first."""
    if not counts:
        return []
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    topic_width = max(len(topic or "-") for (topic, _), _ in rows)
    number_width = max(len(str(n)) for _, n in rows)
    return [
        f"  {n:>{number_width}}  {(topic or '-'):<{topic_width}}  {kind}"
        for (topic, kind), n in rows
    ]
