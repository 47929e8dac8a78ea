"""`hydrator dlq replay` as an operator runs it: its command line (the run's, or the one the
exit-65 line prints), and what a test reads back of a replay: the dead letters by source, the
replay's committed position."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

from hydrator.core.records import HEADER_SOURCE
from tests.harness.topics import Consumed

REPLAY_LINE = "once the cause is fixed, replay them: hydrator "


def replay_args(run_args: list[str], *extra: str) -> list[str]:
    """`hydrator dlq replay` with the options of `hydrator run` `run_args`."""
    assert run_args[0] == "run", run_args
    return ["dlq", "replay", *run_args[1:], *extra]


def printed_replay(stderr: str) -> list[str]:
    """The arguments (after `hydrator`) of the replay command the exit-65 line names."""
    (line,) = [line for line in stderr.splitlines() if REPLAY_LINE in line]
    command = line.split(REPLAY_LINE, 1)[1].removesuffix(" (exit 65)")
    return shlex.split(command)


def sources(records: Iterable[Consumed]) -> Counter[str]:
    """How many records name each `hydrator.source`."""
    return Counter((r.header(HEADER_SOURCE) or b"").decode() for r in records)


def committed(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, tuple[int, str]]:
    """The group's committed (offset, metadata) of each partition of `topic`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return {tp.partition: (tp.offset, tp.metadata or "") for tp in found}
