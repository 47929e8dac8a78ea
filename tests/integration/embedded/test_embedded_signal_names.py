"""Ctrl-C on the embedded engine (SIGINT to the process group) is logged as SIGINT, in one
process and with worker processes (whose supervisor passes the stop on as SIGTERM), and the
run ends 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.hydrator_process import App, HydratorProcess

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_is_logged_as_sigint(app: App, tmp_path: Path, workers: int) -> None:
    app.create_source(2)
    args = app.run_args("--workers", str(workers), output_suffix=".out")
    with HydratorProcess(args, tmp_path / "run.log", own_group=True) as engine:
        engine.wait_until_held({0, 1})
        assert engine.interrupt(group=True) == 0, engine.log[-3000:]
    log = engine.log
    if workers == 1:
        assert "SIGINT received: stopping after the current batch" in log, log[-3000:]
    else:
        assert "SIGINT received: the workers commit and stop (sent SIGTERM)" in log, log[-3000:]
    assert "SIGTERM received: stopping" not in log
    assert "Traceback" not in log
