"""The supervisor's progress line under `--workers N` (hydrator/engines/embedded/progress.py)."""

from __future__ import annotations

import logging

import pytest

from hydrator.engines.embedded.progress import Report, RunProgress


def test_no_line_before_a_worker_runs_then_one_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hydrator.progress")
    progress = RunProgress(interval_s=0.0)
    progress.maybe_log()  # workers still wait for the broker: a line would say nothing
    assert not caplog.records
    progress.report(0, Report({"records": 3, "filled_columns": 2}, {"in": 1}, 0))
    progress.maybe_log()
    (line,) = [record.getMessage() for record in caplog.records]
    assert "filled columns 2" in line and "records 3" in line and "lag in=1" in line
