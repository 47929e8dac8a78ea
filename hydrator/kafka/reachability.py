"""Waiting for the broker, and keeping librdkafka's connection chatter out of the log.

A broker that is down (at start-up or during an outage) makes every librdkafka client log each
failed connection attempt, several per second per client. The engine's clients log through
`client_logger()` instead, which lets one line of a kind through per `REPEAT_S`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hydrator.errors import TemporaryFailure

log = logging.getLogger(__name__)

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 15.0
ATTEMPT_TIMEOUT_S = 5.0
REPEAT_S = 60.0


class BrokerUnavailable(TemporaryFailure, RuntimeError):
    """No broker answered at --bootstrap-servers within --startup-timeout."""


def backoff_s(attempt: int, first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S) -> float:
    """1, 2, 4, 8, 15, 15, ... seconds for attempt 0, 1, 2, ..."""
    return min(max_s, first_s * 2 ** min(attempt, 16))


def wait_for_broker(
    admin_config: dict[str, Any],
    timeout_s: float,
    should_stop: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Until a broker at `bootstrap.servers` answers a metadata request: True; False when a
    stop was requested meanwhile. One log line per failed attempt; `BrokerUnavailable` after
    `timeout_s`."""
    servers = admin_config["bootstrap.servers"]
    # Its own client, silent: the attempts are reported here, one line each.
    admin = AdminClient({**admin_config, "logger": _silent()})
    began = time.monotonic()
    attempt = 0
    while not should_stop():
        try:
            admin.list_topics(timeout=ATTEMPT_TIMEOUT_S)
            if attempt:
                log.info("broker at --bootstrap-servers %s answers again", servers)
            return True
        except KafkaException as exc:
            reason = exc.args[0].str() if exc.args else str(exc)
        waited = time.monotonic() - began
        if waited >= timeout_s:
            raise BrokerUnavailable(
                f"no broker answered at --bootstrap-servers {servers} within "
                f"{_duration(timeout_s)} (--startup-timeout); last error: {reason}"
            )
        delay = min(backoff_s(attempt), max(timeout_s - waited, 0.0))
        attempt += 1
        log.warning(
            "no broker answers at --bootstrap-servers %s (attempt %d: %s); retrying in %.0f s, "
            "for up to %s (--startup-timeout)",
            servers,
            attempt,
            reason,
            delay,
            _duration(timeout_s),
        )
        _sleep_unless(delay, should_stop, sleep)
    return False


def client_logger() -> logging.Logger:
    """The logger to give a librdkafka client (`"logger": client_logger()`)."""
    logger = logging.getLogger("hydrator.librdkafka")
    if not any(isinstance(f, _RepeatFilter) for f in logger.filters):
        logger.addFilter(_RepeatFilter(REPEAT_S))
    return logger


class _RepeatFilter(logging.Filter):
    """Lets a message through once per `window_s`, counting the similar ones it held back
    (similar: the same text once numbers, such as client and port numbers, are ignored)."""

    _NUMBERS = re.compile(r"\d+")

    def __init__(self, window_s: float) -> None:
        super().__init__()
        self._window_s = window_s
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        kind = self._NUMBERS.sub("#", record.getMessage())
        now = time.monotonic()
        last, held = self._seen.get(kind, (-self._window_s, 0))
        if now - last < self._window_s:
            self._seen[kind] = (last, held + 1)
            return False
        if len(self._seen) > 1000:
            self._seen.clear()
        self._seen[kind] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} similar lines held back)"
            record.args = None
        return True


def _silent() -> logging.Logger:
    logger = logging.getLogger("hydrator.librdkafka.silent")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def _sleep_unless(
    seconds: float, should_stop: Callable[[], bool], sleep: Callable[[float], None]
) -> None:
    end = time.monotonic() + seconds
    while not should_stop() and time.monotonic() < end:
        sleep(min(0.2, max(end - time.monotonic(), 0.0)))


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
