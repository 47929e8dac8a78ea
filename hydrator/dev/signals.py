"""Ctrl-C and SIGTERM as a request to stop: the long-running dev commands finish what they are
doing, clean up and exit 0, instead of dying with a traceback mid-way."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """Within the block, SIGINT and SIGTERM set `stop`; the previous handlers come back after."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[signal.Signals, Any] = {}
    for signum in STOP_SIGNALS:
        previous[signum] = signal.signal(signum, handler)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
