"""The Spark engine's processing clock: the driver's downtime arithmetic, the catch-up gate, and
a group function that re-arms a timeout Spark fires early by the wall clock. (The ledger's files
in a real checkpoint directory: tests/integration/spark/test_spark_state_dir.py.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from hydrator.core import HydrationSettings
from hydrator.engines.spark import clock, stateful
from hydrator.engines.spark.clock import (
    CatchUpGate,
    ClockReading,
    gate_is_open,
    latest_reading,
    resumed_offset,
)
from hydrator.engines.spark.stateful import STATE_SCHEMA_VERSION, HydratorSpec, group_function
from state.codec import encode_state
from state.record import StateRecord
from tests.unit.engines.spark.test_spark_steps import TOPIC, TOPOLOGY, FakeState

T0 = 1_700_000_000_000


def test_a_first_run_counts_no_downtime() -> None:
    assert resumed_offset(None, T0) == 0


def test_downtime_since_the_last_heartbeat_adds_to_the_offset() -> None:
    assert resumed_offset(ClockReading(5_000, T0), T0 + 60_000) == 65_000
    # a wall clock set back counts no downtime, and takes none away
    assert resumed_offset(ClockReading(5_000, T0), T0 - 60_000) == 5_000


def test_the_newer_of_two_readings_wins_and_a_torn_one_is_refused() -> None:
    older, newer = ClockReading(1, T0, number=7), ClockReading(2, T0 + 1000, number=8)
    assert latest_reading([newer, older]) == newer
    assert latest_reading([None, older]) == older
    assert latest_reading([None, None]) is None
    assert ClockReading.from_json(newer.to_json()) == newer
    # what earlier versions wrote: no number
    assert ClockReading.from_json(b'{"offset_ms": 5, "alive_ms": 6}') == ClockReading(5, 6, 0)
    for torn in (b"", b'{"offset_ms": 5, "al', b"[1, 2]", b'{"offset_ms": "x", "alive_ms": 1}'):
        with pytest.raises(ValueError):
            ClockReading.from_json(torn)


@pytest.mark.parametrize(("offset_ms", "kept"), [(0, False), (90_000, True)])
def test_a_timeout_fired_early_by_the_wall_clock_is_armed_again(
    monkeypatch: pytest.MonkeyPatch, offset_ms: int, kept: bool
) -> None:
    """A tombstone dated T0 with 60 s retention; Spark fires its timeout at T0 + 100 s by the
    wall clock. After 90 s of downtime only 10 s of processing time have passed."""
    settings = HydrationSettings(tombstone_retention_ms=60_000)
    tombstone = StateRecord(image=None, pos=(3,), deleted=True, updated_at_ms=T0)
    state = FakeState()
    state.value = (STATE_SCHEMA_VERSION, encode_state(tombstone))
    state.hasTimedOut = True
    monkeypatch.setattr(stateful, "time", SimpleNamespace(time=lambda: (T0 + 100_000) / 1000))
    hydrate = group_function(HydratorSpec(settings), TOPOLOGY, offset_ms)
    empty = pd.DataFrame({"group": [], "record": []})
    list(hydrate((f"{TOPIC}\x00" + '{"id":1}',), iter([empty]), state))
    assert state.exists is kept
    if kept:
        assert state.timeout_ms == 50_000  # what remains of the retention


class Opened:
    def __init__(self) -> None:
        self.times = 0

    def __call__(self) -> None:
        self.times += 1


def test_the_gate_opens_once_a_batch_has_reached_every_end() -> None:
    opened = Opened()
    gate = CatchUpGate({("in", 0): 10, ("in", 1): 4, ("handoff", 0): 0}, opened)
    gate.reached({("in", 0): 10, ("in", 1): 3})
    assert not gate.is_open and opened.times == 0
    gate.reached({("in", 0): 10, ("in", 1): 4})
    assert gate.is_open and opened.times == 1
    gate.reached({("in", 0): 11, ("in", 1): 5})
    assert opened.times == 1
    # nothing to catch up with: open from the start
    assert CatchUpGate({("in", 0): 0}, opened).is_open and opened.times == 2


def test_a_closed_gate_re_arms_a_due_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = HydrationSettings(tombstone_retention_ms=60_000)
    tombstone = StateRecord(image=None, pos=(3,), deleted=True, updated_at_ms=T0)
    state = FakeState()
    state.value = (STATE_SCHEMA_VERSION, encode_state(tombstone))
    state.hasTimedOut = True
    monkeypatch.setattr(stateful, "time", SimpleNamespace(time=lambda: (T0 + 100_000) / 1000))
    # where Spark puts the files it ships with tasks
    monkeypatch.setattr(clock, "shipped_files_dir", lambda: str(tmp_path))
    gate = ("hydrator-catch-up-run1", "run1")
    hydrate = group_function(HydratorSpec(settings), TOPOLOGY, 0, gate)
    empty = pd.DataFrame({"group": [], "record": []})
    list(hydrate((f"{TOPIC}\x00" + '{"id":1}',), iter([empty]), state))
    assert state.exists and state.timeout_ms == 1  # due: it fires again in the next batch
    assert not gate_is_open("hydrator-catch-up-run2", "run2")
    (tmp_path / "hydrator-catch-up-run1").write_text("open")
    list(hydrate((f"{TOPIC}\x00" + '{"id":1}',), iter([empty]), state))
    assert not state.exists
    # another engine run's gate stays closed
    assert not gate_is_open("hydrator-catch-up-run2", "run2")
