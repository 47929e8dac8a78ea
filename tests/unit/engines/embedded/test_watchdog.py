"""The watchdog's decisions (watchdog.py), and the helpers that keep an outage's log short
(reachability.py). The engine-level behaviour is in
tests/integration/embedded/test_embedded_outage.py."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from hydrator.engines.embedded.watchdog import EXIT_STOPPED, EXIT_TEMPORARY, Watchdog
from hydrator.kafka.reachability import _RepeatFilter, backoff_s


class Exited(Exception):
    pass


def _exit(code: int) -> None:
    raise Exited(code)


def _watchdog() -> Watchdog:
    return Watchdog(margin_s=30, stop_grace_s=10, exit_process=_exit)


def test_a_call_past_its_timeout_and_margin_ends_the_process_for_a_restart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dog = _watchdog()
    with dog.blocking("send_offsets_to_transaction", 60):
        began = time.monotonic()
        dog.check(began + 89)  # within timeout + margin: nothing
        with pytest.raises(Exited) as exited:
            dog.check(began + 91)
    assert exited.value.args == (EXIT_TEMPORARY,)
    assert "send_offsets_to_transaction has been blocked for 91 s" in caplog.text


def test_no_call_no_deadline() -> None:
    dog = _watchdog()
    with dog.blocking("flush", 1):
        pass
    dog.check(time.monotonic() + 3600)


def test_a_stop_during_a_blocked_call_gets_a_grace_then_ends_the_process() -> None:
    dog = _watchdog()
    with dog.blocking("flush", 60):
        now = time.monotonic()
        dog.signalled(now)
        dog.check(now + 9)
        with pytest.raises(Exited) as exited:
            dog.check(now + 11)
    assert exited.value.args == (EXIT_STOPPED,)


def test_a_second_stop_signal_during_a_blocked_call_ends_the_process_at_once() -> None:
    dog = _watchdog()
    with dog.blocking("commit_transaction", 60):
        now = time.monotonic()
        dog.signalled(now)
        dog.signalled(now + 1)
        with pytest.raises(Exited):
            dog.check(now + 1)


def test_a_stop_outside_blocking_calls_is_left_to_the_clean_stop() -> None:
    dog = _watchdog()
    now = time.monotonic()
    dog.signalled(now)
    dog.check(now + 100)
    # The final commit after the stop gets its own grace.
    with dog.blocking("commit_transaction", 60):
        dog.check(time.monotonic() + 5)


def test_the_watch_thread_sees_a_signal_the_main_thread_cannot_handle() -> None:
    """While the main thread is "blocked", SIGTERM reaches the watchdog through the wake-up fd."""
    exits: list[int] = []
    dog = Watchdog(margin_s=30, stop_grace_s=0.2, exit_process=exits.append)
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        with dog.running(), dog.blocking("flush", 60):
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
            deadline = time.monotonic() + 5
            while not exits and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert exits and exits[0] == EXIT_STOPPED


def test_backoff_grows_and_is_capped() -> None:
    assert [backoff_s(n) for n in range(7)] == [1, 2, 4, 8, 15, 15, 15]


def test_repeated_client_log_lines_are_held_back_and_counted() -> None:
    repeat = _RepeatFilter(window_s=60)

    def record(text: str) -> logging.LogRecord:
        return logging.LogRecord("x", logging.ERROR, __file__, 1, text, None, None)

    line = "FAIL [rdkafka#consumer-{}] Connect to ipv4#127.0.0.1:{} failed: Connection refused"
    assert repeat.filter(record(line.format(3, 4000)))
    assert not repeat.filter(record(line.format(4, 4001)))  # only numbers differ
    assert repeat.filter(record("SESSTMOUT [rdkafka#consumer-3] session timed out"))
