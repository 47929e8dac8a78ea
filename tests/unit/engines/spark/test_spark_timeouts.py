"""The Spark driver's timeout schedule: when to make a micro-batch run for due timeouts, without
no-data batches (hydrator/engines/spark/timeouts.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import Row

from hydrator.engines.spark import timeouts
from hydrator.engines.spark.query import OBSERVATION
from hydrator.engines.spark.stateful import NEXT_TIMEOUT
from hydrator.engines.spark.timeouts import TimeoutSchedule, TimeoutTicker


def known(earliest: int | None) -> TimeoutSchedule:
    schedule = TimeoutSchedule()
    schedule.scan_started()
    schedule.scanned(earliest)
    return schedule


def test_the_bound_is_unknown_until_the_state_store_is_read() -> None:
    schedule = TimeoutSchedule()
    assert schedule.needs_scan() and not schedule.tick_due(10**15)
    nothing = known(None)
    assert not nothing.needs_scan() and not nothing.tick_due(10**15)
    assert nothing.wait_s(0) is None


def test_a_tick_is_due_at_the_earliest_timeout_and_written_once() -> None:
    schedule = known(5_000)
    assert schedule.wait_s(4_000) == 1.0
    assert not schedule.tick_due(4_999)
    assert schedule.tick_due(5_000)
    schedule.tick_sent(5_000)
    assert not schedule.tick_due(5_100)  # its batch has not run yet
    retry_ms = int(timeouts.TICK_RETRY_S * 1000)
    assert schedule.tick_due(5_000 + retry_ms)  # lost: written again


def test_batches_lower_the_bound_with_what_they_armed() -> None:
    schedule = known(None)
    schedule.batch_ended(1_000, 9_000)
    schedule.batch_ended(2_000, 7_000)
    schedule.batch_ended(3_000, None)
    assert schedule.due == 7_000 and not schedule.needs_scan()


def test_a_batch_started_past_the_bound_fired_it_and_the_next_is_unknown() -> None:
    schedule = known(5_000)
    schedule.tick_sent(5_000)
    schedule.batch_ended(5_200, None)
    assert schedule.needs_scan()  # keys the batch did not touch keep timeouts nobody reported
    schedule.scan_started()
    schedule.scanned(60_000)
    assert schedule.due == 60_000 and not schedule.tick_due(59_999)


def test_what_batches_report_during_a_read_of_the_state_store_is_added_to_it() -> None:
    schedule = TimeoutSchedule()
    schedule.batch_ended(500, 700)  # committed before the read: the read includes it
    schedule.scan_started()
    schedule.batch_ended(1_000, 8_000)
    schedule.batch_ended(1_500, 1_700)  # re-armed as due: the catch-up gate was closed
    schedule.batch_ended(2_000, None)  # ... and fired by the next batch: gone
    schedule.scanned(9_000)
    assert schedule.due == 8_000


def test_a_read_raced_by_a_batch_that_fired_its_result_is_read_again() -> None:
    schedule = TimeoutSchedule()
    schedule.scan_started()
    schedule.batch_ended(2_000, None)
    schedule.scanned(1_500)  # a state the batch started at 2 000 may have fired already
    assert schedule.needs_scan()
    schedule.scan_started()
    schedule.scanned(1_500)  # no batch meanwhile: it is still there (not yet fired)
    assert schedule.due == 1_500 and schedule.tick_due(3_000)


@dataclass
class Progress:
    timestamp: str
    observedMetrics: dict[str, Any] = field(default_factory=dict)  # Spark's name


def progress(started_ms: int, next_timeout_ms: int | None) -> Progress:
    started = datetime.fromtimestamp(started_ms / 1000, UTC).isoformat(timespec="milliseconds")
    row = Row(events=1, **{NEXT_TIMEOUT: next_timeout_ms})
    return Progress(started.replace("+00:00", "Z"), {OBSERVATION: row})


def test_the_ticker_reads_the_bound_when_quiet_ticks_when_due_and_reads_again_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timeouts, "QUIET_S", 0.05)
    now_ms = int(time.time() * 1000)
    armed = [now_ms + 300]  # what the state store holds
    reads: list[int] = []
    ticks = threading.Event()

    def earliest() -> int | None:
        reads.append(int(time.time() * 1000))
        return armed[0]

    def tick() -> bool:
        ticks.set()
        return True

    ticker = TimeoutTicker(earliest, tick, threading.Event())
    ticker.start()
    try:
        assert ticks.wait(5)
        assert int(time.time() * 1000) >= now_ms + 300 and len(reads) == 1
        # the tick's batch (started after the tick) fires it and arms another: the next bound
        # is read again from the state store, which now holds that one
        armed[0] = now_ms + 60_000
        ticker.batch_ended(progress(int(time.time() * 1000) + 1, now_ms + 60_000))
        deadline = time.monotonic() + 5
        while len(reads) < 2:
            assert time.monotonic() < deadline, "the bound was not read again"
            time.sleep(0.01)
        time.sleep(0.1)
        assert ticker.schedule.due == now_ms + 60_000 and len(reads) == 2
    finally:
        ticker.stop()


def test_the_ticker_starts_nothing_once_the_engine_stops() -> None:
    stopping = threading.Event()
    stopping.set()
    calls: list[str] = []
    ticker = TimeoutTicker(lambda: calls.append("read") or None, lambda: True, stopping)
    ticker.start()
    ticker.stop()
    assert calls == []
