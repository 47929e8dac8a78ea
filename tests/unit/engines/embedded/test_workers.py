"""`--workers`: the supervisor's rules (which worker end restarts it, which ends the run, the
run's exit code), the board the workers share, the stop signals a worker takes, its place in
the state directory and its log lines. The supervisor runs here with small worker functions in
real processes; the engine's workers against a real broker are in
tests/integration/embedded/test_embedded_workers.py."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hydrator.config import EmbeddedSettings, RunConfig
from hydrator.engines.embedded import workers
from hydrator.engines.embedded.progress import Report
from hydrator.engines.embedded.state_dir import StateDirectory, StateDirLocked
from hydrator.engines.embedded.watchdog import WORKER, Watchdog
from hydrator.engines.embedded.workers import (
    Supervisor,
    Verdict,
    Worker,
    WorkerBoard,
    exit_code,
    judge,
    run_exit_code,
)
from hydrator.kafka.client_config import ClientSettings
from hydrator.ops.logs import configure

# -- the rules -----------------------------------------------------------------------------------


def test_a_worker_killed_by_a_signal_is_started_again() -> None:
    assert judge(-signal.SIGKILL, available_now=False) is Verdict.RESTART
    assert judge(-signal.SIGSEGV, available_now=True) is Verdict.RESTART


def test_a_clean_end_is_done_only_under_available_now() -> None:
    assert judge(0, available_now=True) is Verdict.DONE
    # streaming, a worker ends only when asked: one stopped alone is started again
    assert judge(0, available_now=False) is Verdict.RESTART


@pytest.mark.parametrize("code", [1, 2, 75, 130])
def test_any_other_exit_code_ends_the_run(code: int) -> None:
    assert judge(code, available_now=False) is Verdict.END_RUN
    assert judge(code, available_now=True) is Verdict.END_RUN


def test_exit_codes_as_a_shell_shows_them() -> None:
    assert exit_code(-signal.SIGKILL) == 137
    assert exit_code(75) == 75
    assert run_exit_code(None, [0, 0]) == 0
    assert run_exit_code(None, [0, 130, 1]) == 130  # the first that was not clean
    assert run_exit_code(2, [0, 0]) == 2  # the end that ended the run wins


# -- the board -----------------------------------------------------------------------------------


def test_the_board_tells_each_worker_what_the_others_hold() -> None:
    board = WorkerBoard(multiprocessing.get_context("spawn"), 2, capacity=8)
    board.claim(0, {0, 1})
    board.claim(1, {2, 3})
    assert board.held_by_others(0) == {2, 3}
    assert board.held_by_others(1) == {0, 1}
    board.claim(0, {1})  # a rebalance took partition 0
    assert board.held_by_others(1) == {1}
    board.forget(1)
    assert board.held_by_others(0) == set()
    board.claim(0, {9})  # beyond what the board holds: unknown, never claimed
    assert board.held_by_others(1) == set()


def test_the_run_is_done_once_every_worker_was_done_at_the_same_time() -> None:
    board = WorkerBoard(multiprocessing.get_context("spawn"), 2)
    assert board.finish(0, True) is False
    assert board.finish(1, False) is False
    assert board.finish(1, True) is True
    assert board.run_done()
    # the group may yet hand one's partitions to the other: no new work
    assert board.finish(0, False) is True


def test_workers_join_together_at_start_and_alone_once_restarted() -> None:
    board = WorkerBoard(multiprocessing.get_context("spawn"), 2)
    assert not board.ready(0)
    assert board.ready(1)
    board.forget(1)  # died: its next start joins at once
    assert board.ready(1)


# -- stop signals --------------------------------------------------------------------------------


def test_a_worker_takes_sigterm_as_a_clean_stop_however_often_and_sigint_as_now() -> None:
    assert not WORKER.means_now(signal.SIGTERM, already_stopping=False)
    assert not WORKER.means_now(signal.SIGTERM, already_stopping=True)
    assert WORKER.means_now(signal.SIGINT, already_stopping=False)


def test_a_workers_watchdog_waits_the_grace_on_repeated_sigterm_but_not_on_sigint() -> None:
    exits: list[int] = []
    dog = Watchdog(margin_s=30, stop_grace_s=10, exit_process=exits.append)
    with dog.running(WORKER), dog.blocking("flush", 60):
        now = time.monotonic()
        dog.signalled(now, signal.SIGTERM)
        dog.signalled(now + 1, signal.SIGTERM)  # systemd's and the supervisor's
        dog.check(now + 5)
        assert exits == []
        dog.signalled(now + 6, signal.SIGINT)
        dog.check(now + 6)
    assert exits == [130]


# -- the state directory -------------------------------------------------------------------------


def test_each_worker_has_its_own_lock_and_waits_for_its_predecessor(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path, "app")
    first.lock_worker(0)
    StateDirectory(tmp_path, "app").lock_worker(1)  # another worker: its own lock
    with pytest.raises(StateDirLocked, match="worker 0"):
        StateDirectory(tmp_path, "app").lock_worker(0, wait_s=0.3)
    threading.Timer(0.3, first.unlock).start()
    StateDirectory(tmp_path, "app").lock_worker(0, wait_s=5)


def test_the_worker_count_is_recorded(tmp_path: Path) -> None:
    state_dir = StateDirectory(tmp_path, "app")
    state_dir.lock()
    assert state_dir.recorded_workers() == 1
    state_dir.record_workers(3)
    assert StateDirectory(tmp_path, "app").recorded_workers() == 3


# -- log lines -----------------------------------------------------------------------------------


def _line(log_format: str, capsys: pytest.CaptureFixture[str]) -> str:
    configure("INFO", log_format, "app", {"s3cret"}, worker=1)
    try:
        logging.getLogger("hydrator.progress").info("10 records/s with s3cret")
    finally:
        logging.getLogger().handlers.clear()
    return capsys.readouterr().err.strip()


def test_a_workers_lines_name_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert _line("text", capsys).endswith(
        "INFO hydrator.progress [worker 1]: 10 records/s with ***"
    )
    entry = json.loads(_line("json", capsys))
    assert entry["worker"] == 1 and entry["message"] == "10 records/s with ***"


# -- the supervisor with real processes ----------------------------------------------------------
# Worker functions run in spawned processes, which import them from this module by name.


def _embedded(tmp_path: Path, count: int = 2) -> EmbeddedSettings:
    return EmbeddedSettings(state_dir=tmp_path, workers=count)


def _config(tmp_path: Path, available_now: bool = False) -> RunConfig:
    return RunConfig(
        kafka=ClientSettings("unused:1"),
        input_topics=("t",),
        output_suffix=".e",
        application_id="app",
        available_now=available_now,
    )


def _incarnation(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    """How many times this worker has been started (counted in a file)."""
    path = embedded.state_dir / f"starts-{worker.index}"
    count = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(count))
    return count


def _wait_for_sigterm(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    _incarnation(config, embedded, worker)
    worker.started()
    time.sleep(120)  # SIGTERM ends it with 0, SIGINT with 130 (the worker's own handlers)
    return 1


def _worker_1_fails_with_2(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    if worker.index == 1:
        return 2
    return _wait_for_sigterm(config, embedded, worker)


def _worker_1_killed_once(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    worker.started()
    if worker.index == 1 and _incarnation(config, embedded, worker) == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return 0


def _always_killed(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    worker.started()
    _incarnation(config, embedded, worker)
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


def _reports_and_is_killed_once(
    config: RunConfig, embedded: EmbeddedSettings, worker: Worker
) -> int:
    """Reports 10 records per worker process (and lag 1 while it runs); worker 1's first
    process is killed after its report."""
    worker.started()
    worker.report(Report({"records": 10, "commits": 1}, {"t": 1}, 1))
    if worker.index == 1 and _incarnation(config, embedded, worker) == 1:
        time.sleep(0.5)  # the supervisor reads the report before it sees the end
        os.kill(os.getpid(), signal.SIGKILL)
    worker.report(Report({"records": 10, "commits": 2}, {"t": 0}, 0))
    return 0


def _starts(tmp_path: Path, index: int) -> int:
    path = tmp_path / f"starts-{index}"
    return int(path.read_text()) if path.exists() else 0


def test_a_worker_ending_with_a_code_stops_the_others_and_the_run_ends_with_it(
    tmp_path: Path,
) -> None:
    code = Supervisor(_config(tmp_path), _embedded(tmp_path), _worker_1_fails_with_2).run()
    assert code == 2
    assert _starts(tmp_path, 0) == 1  # started once, stopped by SIGTERM


def test_a_killed_worker_is_started_again_and_available_now_ends_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "backoff_s", lambda attempt: 0.1)
    code = Supervisor(
        _config(tmp_path, available_now=True), _embedded(tmp_path), _worker_1_killed_once
    ).run()
    assert code == 0
    assert _starts(tmp_path, 1) == 2


def test_the_supervisor_logs_the_runs_progress_the_sum_of_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(workers, "backoff_s", lambda attempt: 0.1)
    caplog.set_level(logging.INFO, "hydrator.progress")
    config = _config(tmp_path, available_now=True)
    assert Supervisor(config, _embedded(tmp_path), _reports_and_is_killed_once).run() == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "hydrator.progress"]
    # worker 0: 10; worker 1: 10 from the process killed, 10 from the next
    assert lines[-1].endswith("lag t=0, parked 0, dead letters 0, records 30, commits 5")


def _fails_then_ends_slowly(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    """Reports, says what ends it, and takes a while to end (a loaded machine)."""
    worker.started()
    worker.report(Report({"records": 10, "commits": 1}, {"t": 0}, 0))
    worker.tell_error("Error: no broker answered")
    time.sleep(1.0)  # the supervisor's progress line comes every 0.1 s meanwhile
    return 75


def test_a_failed_workers_error_is_the_last_line_of_the_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = replace(_config(tmp_path), progress_interval_s=0.1)
    configure("INFO", "text", "app", set())
    try:
        assert Supervisor(config, _embedded(tmp_path, 1), _fails_then_ends_slowly).run() == 75
    finally:
        logging.getLogger().handlers.clear()
    lines = capfd.readouterr().err.strip().splitlines()
    assert any("records 10, commits 1" in line for line in lines[:-1]), lines
    assert lines[-1] == "Error: no broker answered", lines


def test_a_worker_that_keeps_dying_ends_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "backoff_s", lambda attempt: 0.05)
    monkeypatch.setattr(workers, "GIVE_UP_AFTER", 2)
    code = Supervisor(_config(tmp_path), _embedded(tmp_path, 1), _always_killed).run()
    assert code == 128 + signal.SIGKILL
    assert _starts(tmp_path, 0) == 3


def _stop_when_started(tmp_path: Path, *signums: signal.Signals) -> None:
    """Send this process (the supervisor) `signums`, once both workers run."""

    def stop() -> None:
        deadline = time.monotonic() + 60
        while not (_starts(tmp_path, 0) and _starts(tmp_path, 1)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for signum in signums:
            time.sleep(0.5)
            os.kill(os.getpid(), signum)

    threading.Thread(target=stop, daemon=True).start()


def test_sigterm_stops_every_worker_and_the_run_ends_0(tmp_path: Path) -> None:
    _stop_when_started(tmp_path, signal.SIGTERM)
    assert Supervisor(_config(tmp_path), _embedded(tmp_path), _wait_for_sigterm).run() == 0
    assert _starts(tmp_path, 0) == _starts(tmp_path, 1) == 1


def test_a_stop_while_a_worker_starts_waits_for_its_handlers(tmp_path: Path) -> None:
    """Worker 1 is asked to stop while still starting: it ends cleanly, not killed."""
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert Supervisor(_config(tmp_path), _embedded(tmp_path, 1), _wait_for_sigterm).run() == 0


def test_a_second_stop_request_stops_the_workers_now(tmp_path: Path) -> None:
    """The workers here ignore the first request: the second reaches them as SIGINT."""
    _stop_when_started(tmp_path, signal.SIGTERM, signal.SIGINT)
    assert Supervisor(_config(tmp_path), _embedded(tmp_path), _ignore_sigterm).run() == 130


def _ignore_sigterm(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return _wait_for_sigterm(config, embedded, worker)


def test_the_supervisor_holds_the_state_directory(tmp_path: Path) -> None:
    held = StateDirectory(tmp_path, "app")
    held.lock()
    with pytest.raises(StateDirLocked):
        Supervisor(_config(tmp_path), _embedded(tmp_path), _wait_for_sigterm).run()
    held.unlock()
