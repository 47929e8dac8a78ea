"""When a batch is due: at --commit-interval while the engine keeps up, up to
--backlog-commit-interval while a backlog waits in its partitions."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from hydrator.engines.embedded.loop import (
    BACKLOG_RECORDS,
    MIN_HELD_BYTES,
    POLL_TIMEOUT_S,
    StreamLoop,
    held_bytes_cap,
)
from hydrator.topology.layout import Topology

TOPOLOGY = Topology("app", {"db.orders": "db.orders.out"}, 2)


class FetchedConsumer:
    """What the consumer last fetched: each input partition `lag` records past its position."""

    def __init__(self, lag: int) -> None:
        self.lag = lag

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 100) for tp in partitions]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool) -> tuple[int, int]:
        assert cached  # never a broker round trip on the hot path
        return 0, 100 + self.lag


def _loop(open_s: float, lag_per_partition: int, backlog_interval_ms: int) -> StreamLoop:
    loop = StreamLoop.__new__(StreamLoop)  # only the commit decision is exercised
    loop._consumer = FetchedConsumer(lag_per_partition)  # type: ignore[assignment]
    loop._topology = TOPOLOGY
    partitions = [TopicPartition("db.orders", p) for p in range(2)]
    partitions += [TopicPartition(TOPOLOGY.handoff_topic, p) for p in range(2)]
    loop._assignment = SimpleNamespace(tasks={}, partitions=partitions)  # type: ignore[assignment]
    loop._uncommitted = 10
    loop._held_cap = MIN_HELD_BYTES
    loop._commit_interval_s = 0.1
    loop._backlog_interval_s = max(backlog_interval_ms, 100) / 1000
    loop._batch_started = time.monotonic() - open_s
    return loop


@pytest.mark.parametrize(
    ("open_s", "lag", "due"),
    [
        (0.05, 0, False),  # the commit interval has not run out
        (0.2, 10, True),  # caught up: every commit interval
        (0.2, BACKLOG_RECORDS, False),  # behind: the batch stays open...
        (5.1, BACKLOG_RECORDS, True),  # ...up to the backlog interval
    ],
)
def test_a_batch_stays_open_while_a_backlog_waits(open_s: float, lag: int, due: bool) -> None:
    assert _loop(open_s, lag // 2, backlog_interval_ms=5000)._commit_due() is due


def test_a_backlog_interval_no_longer_than_the_commit_interval_never_stretches() -> None:
    assert _loop(0.2, BACKLOG_RECORDS, backlog_interval_ms=100)._commit_due() is True


def test_a_consume_waits_no_longer_than_until_the_open_batch_is_due() -> None:
    nothing_open = _loop(0.0, 0, backlog_interval_ms=5000)
    nothing_open._batch_started = None
    assert nothing_open._poll_timeout_s() == POLL_TIMEOUT_S
    assert _loop(0.09, 0, backlog_interval_ms=5000)._poll_timeout_s() <= 0.01
    assert _loop(5.1, BACKLOG_RECORDS, backlog_interval_ms=5000)._poll_timeout_s() == 0.0


def test_a_batch_held_open_by_a_backlog_waits_for_its_records_without_spinning() -> None:
    # past the commit interval, open because a backlog waits: the next records are what it
    # waits for (a consume that waited no time turned the loop 80,000 times over a backlog
    # of 100,000 events, each turn reading the lag and the timers)
    held_open = _loop(0.2, BACKLOG_RECORDS, backlog_interval_ms=5000)
    assert held_open._commit_due() is False
    assert held_open._poll_timeout_s() == POLL_TIMEOUT_S
    assert _loop(4.99, BACKLOG_RECORDS, backlog_interval_ms=5000)._poll_timeout_s() <= 0.01


def test_the_changed_state_an_open_batch_holds_is_half_the_state_budget() -> None:
    # a single worker takes the whole default budget (256 MB): it may hold 128 MB of changed
    # rows, so a hot key set of wide rows does not force a commit every second
    assert held_bytes_cap(256 * 1024 * 1024) == 128 * 1024 * 1024
    # a small budget does not commit more often than before the cap followed it
    assert held_bytes_cap(16 * 1024 * 1024) == MIN_HELD_BYTES


def test_a_batch_holding_more_changed_state_than_its_cap_is_due() -> None:
    loop = _loop(0.01, 0, backlog_interval_ms=5000)
    held = SimpleNamespace(held_bytes=MIN_HELD_BYTES)
    loop._assignment = SimpleNamespace(tasks={0: held}, partitions=[])  # type: ignore[assignment]
    assert loop._commit_due() is True
    held.held_bytes = MIN_HELD_BYTES - 1
    assert loop._commit_due() is False
