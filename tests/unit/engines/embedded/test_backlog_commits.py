"""When a batch is due: at --commit-interval while the engine keeps up, up to
--backlog-commit-interval while a backlog waits in its partitions."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from hydrator.engines.embedded.batch import (
    BACKLOG_RECORDS,
    MIN_HELD_BYTES,
    POLL_TIMEOUT_S,
    OpenBatch,
    held_bytes_cap,
)
from hydrator.engines.embedded.run_parts import RunParts
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


def _open_batch(open_s: float, lag_per_partition: int, backlog_interval_ms: int) -> OpenBatch:
    """An open batch of 10 records, open `open_s`, at --commit-interval 100ms (only the commit
    decision is exercised)."""
    partitions = [TopicPartition("db.orders", p) for p in range(2)]
    partitions += [TopicPartition(TOPOLOGY.handoff_topic, p) for p in range(2)]
    parts = RunParts(
        consumer=FetchedConsumer(lag_per_partition),  # type: ignore[arg-type]
        writer=SimpleNamespace(in_transaction=False),  # type: ignore[arg-type]
        assignment=SimpleNamespace(tasks={}, partitions=partitions, cache_bytes=0),  # type: ignore[arg-type]
        topology=TOPOLOGY,
        counts=None,  # type: ignore[arg-type]
        metrics=None,  # type: ignore[arg-type]
    )
    batch = OpenBatch(parts, 100, backlog_interval_ms)
    assert batch.held_cap == MIN_HELD_BYTES
    batch.records = 10
    batch.started = time.monotonic() - open_s
    return batch


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
    assert _open_batch(open_s, lag // 2, backlog_interval_ms=5000).due() is due


def test_a_backlog_interval_no_longer_than_the_commit_interval_never_stretches() -> None:
    assert _open_batch(0.2, BACKLOG_RECORDS, backlog_interval_ms=100).due() is True


def test_a_consume_waits_no_longer_than_until_the_open_batch_is_due() -> None:
    nothing_open = _open_batch(0.0, 0, backlog_interval_ms=5000)
    nothing_open.started = None
    assert nothing_open.poll_timeout_s() == POLL_TIMEOUT_S
    assert _open_batch(0.09, 0, backlog_interval_ms=5000).poll_timeout_s() <= 0.01
    assert _open_batch(5.1, BACKLOG_RECORDS, backlog_interval_ms=5000).poll_timeout_s() == 0.0


def test_a_batch_held_open_by_a_backlog_waits_for_its_records_without_spinning() -> None:
    # past the commit interval, open because a backlog waits: the next records are what it
    # waits for (a consume that waited no time turned the loop 80,000 times over a backlog
    # of 100,000 events, each turn reading the lag and the timers)
    held_open = _open_batch(0.2, BACKLOG_RECORDS, backlog_interval_ms=5000)
    assert held_open.due() is False
    assert held_open.poll_timeout_s() == POLL_TIMEOUT_S
    assert _open_batch(4.99, BACKLOG_RECORDS, backlog_interval_ms=5000).poll_timeout_s() <= 0.01


def test_the_changed_state_an_open_batch_holds_is_half_the_state_budget() -> None:
    # a single worker takes the whole default budget (256 MB): it may hold 128 MB of changed
    # rows, so a hot key set of wide rows does not force a commit every second
    assert held_bytes_cap(256 * 1024 * 1024) == 128 * 1024 * 1024
    # it follows the budget the user gives the state, down to a floor of a few rows' worth
    assert held_bytes_cap(16 * 1024 * 1024) == 8 * 1024 * 1024
    assert held_bytes_cap(1024) == MIN_HELD_BYTES


def test_a_batch_holding_more_changed_state_than_its_cap_is_due() -> None:
    batch = _open_batch(0.01, 0, backlog_interval_ms=5000)
    held = SimpleNamespace(held_bytes=MIN_HELD_BYTES)
    batch._parts.assignment.tasks[0] = held
    assert batch.due() is True
    held.held_bytes = MIN_HELD_BYTES - 1
    assert batch.due() is False


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_the_standard_workloads_hot_keys_do_not_force_commits_under_the_default_budget(
    workers: int,
) -> None:
    """10,000 hot keys of ~9 KB rows (bench/workload.py), each changed once in a batch, spread
    over the workers: each worker's changed rows stay under its cap, whatever the count."""
    from dataclasses import fields

    from hydrator.config import EmbeddedSettings

    (budget,) = [f.default for f in fields(EmbeddedSettings) if f.name == "state_cache_bytes"]
    assert isinstance(budget, int)
    changed_rows = 10_000 * 9_000 // workers
    assert held_bytes_cap(budget // workers) > changed_rows
