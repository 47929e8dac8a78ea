"""The throwaway Tansu broker the demo, the bench and the tests start."""

from __future__ import annotations

import psutil

from hydrator.kafka.local_broker import LocalBroker


def test_entering_a_started_broker_keeps_it_and_stop_stops_the_one_serving() -> None:
    broker = LocalBroker().start(timeout_s=60)
    pid = broker.pid
    assert pid is not None
    with broker as entered:
        assert entered.pid == pid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert broker.pid is None and not psutil.pid_exists(pid)
