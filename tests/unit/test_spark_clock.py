"""The Spark engine's processing clock: the driver's downtime ledger, and a group function that
re-arms a timeout Spark fires early by the wall clock."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from hydrator.core import HydrationSettings
from hydrator.engines.spark import clock, stateful
from hydrator.engines.spark.clock import CLOCK_FILE, CatchUpGate, DowntimeLedger, gate_is_open
from hydrator.engines.spark.stateful import STATE_SCHEMA_VERSION, HydratorSpec, group_function
from state.codec import encode_state
from state.record import StateRecord
from tests.unit.test_spark_steps import TOPIC, TOPICS, FakeState

T0 = 1_700_000_000_000


def test_a_first_run_counts_no_downtime_and_leaves_a_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clock, "wall_ms", lambda: T0)
    ledger = DowntimeLedger(tmp_path / "checkpoint")
    assert ledger.start() == 0
    ledger.stop()
    saved = json.loads((tmp_path / "checkpoint" / CLOCK_FILE).read_text())
    assert saved == {"offset_ms": 0, "alive_ms": T0}


def test_downtime_since_the_last_heartbeat_adds_to_the_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / CLOCK_FILE).write_text(json.dumps({"offset_ms": 5_000, "alive_ms": T0}))
    monkeypatch.setattr(clock, "wall_ms", lambda: T0 + 60_000)
    ledger = DowntimeLedger(tmp_path)
    assert ledger.start() == 65_000
    ledger.stop()
    # a restart right away adds nothing more
    assert DowntimeLedger(tmp_path).start() == 65_000


def test_an_unreadable_ledger_starts_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / CLOCK_FILE).write_text("{not json")
    monkeypatch.setattr(clock, "wall_ms", lambda: T0)
    ledger = DowntimeLedger(tmp_path)
    assert ledger.start() == 0
    ledger.stop()


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
    hydrate = group_function(HydratorSpec(settings), TOPICS, offset_ms)
    empty = pd.DataFrame({"group": [], "record": []})
    list(hydrate((f"{TOPIC}\x00" + '{"id":1}',), iter([empty]), state))
    assert state.exists is kept
    if kept:
        assert state.timeout_ms == 50_000  # what remains of the retention


def test_the_gate_opens_once_a_batch_has_reached_every_end(tmp_path: Path) -> None:
    gate = CatchUpGate(tmp_path, {("in", 0): 10, ("in", 1): 4, ("handoff", 0): 0})
    path = str(gate.path)
    assert not gate_is_open(path, gate.run)
    gate.reached({("in", 0): 10, ("in", 1): 3})
    assert not gate.is_open and not gate_is_open(path, gate.run)
    gate.reached({("in", 0): 10, ("in", 1): 4})
    assert gate.is_open and gate_is_open(path, gate.run)
    # a later engine run starts closed, whatever the file said
    later = CatchUpGate(tmp_path, {("in", 0): 12})
    assert not gate_is_open(path, later.run)


def test_a_closed_gate_re_arms_a_due_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = HydrationSettings(tombstone_retention_ms=60_000)
    tombstone = StateRecord(image=None, pos=(3,), deleted=True, updated_at_ms=T0)
    state = FakeState()
    state.value = (STATE_SCHEMA_VERSION, encode_state(tombstone))
    state.hasTimedOut = True
    monkeypatch.setattr(stateful, "time", SimpleNamespace(time=lambda: (T0 + 100_000) / 1000))
    gate = CatchUpGate(tmp_path, {("in", 0): 10})
    hydrate = group_function(HydratorSpec(settings), TOPICS, 0, (str(gate.path), gate.run))
    empty = pd.DataFrame({"group": [], "record": []})
    list(hydrate((f"{TOPIC}\x00" + '{"id":1}',), iter([empty]), state))
    assert state.exists and state.timeout_ms == 1  # due: it fires again in the next batch
    gate.reached({("in", 0): 10})
    list(hydrate((f"{TOPIC}\x00" + '{"id":1}',), iter([empty]), state))
    assert not state.exists
