"""Waiting for the broker, and keeping librdkafka's connection chatter out of the log.

A broker that is down (at start-up or during an outage) makes every librdkafka client log each
failed connection attempt, several per second per client. The engine's clients log through
`client_logger()` instead, which lets one line of a kind through per `REPEAT_S`.

librdkafka says `Local: Broker transport failure` whether a host name does not resolve or
nothing listens at the address, so a failed attempt is explained here (`diagnose`): a name
that does not resolve, a port that refuses, an address that does not answer, or a port that
answers but not as a Kafka broker. At start-up, --bootstrap-servers whose every host name does
not exist is a configuration error, said at once (`BrokerAddressUnknown`, exit 2); anything
else is waited for up to --startup-timeout (`BrokerUnavailable`, exit 75). `hydrator run` and
`hydrator state bootstrap` wait the same way.
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hydrator.errors import ConfigurationError, TemporaryFailure

log = logging.getLogger(__name__)

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 15.0
ATTEMPT_TIMEOUT_S = 5.0
REPEAT_S = 60.0
# How long one look at an address may take (a TCP connect to a host that drops packets).
PROBE_TIMEOUT_S = 2.0
# The resolver's answers that a name does not exist (not: no answer from the resolver).
_NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


class BrokerUnavailable(TemporaryFailure, RuntimeError):
    """No broker answered at --bootstrap-servers within --startup-timeout."""


class BrokerAddressUnknown(ConfigurationError, RuntimeError):
    """No host name of --bootstrap-servers exists (a typo, most likely): said at once."""


@dataclass(frozen=True)
class Server:
    """One `host:port` of --bootstrap-servers and what looking at it found."""

    address: str
    # None: reachable as far as TCP goes; else why not, in words
    problem: str | None
    # the name does not exist (the resolver said so; not: the resolver did not answer)
    unknown_name: bool = False


def servers_of(bootstrap_servers: str) -> list[tuple[str, str, int | None]]:
    """`(as written, host, port)` of each entry of a bootstrap.servers list (`PROTOCOL://`
    prefixes, `user:password@` credentials and `[v6]` brackets allowed; a missing port is
    None)."""
    found = []
    for entry in bootstrap_servers.split(","):
        written = entry.strip()
        if not written:
            continue
        # credentials may hold '@' themselves: the host follows the last one
        address = written.split("://", 1)[-1].rpartition("@")[2]
        host, port = address, None
        if address.startswith("["):
            host, _, rest = address[1:].partition("]")
            port_text = rest.removeprefix(":")
        else:
            head, sep, port_text = address.rpartition(":")
            if sep and head:
                host = head
            else:
                port_text = ""
        port = int(port_text) if port_text.isdigit() else None
        found.append((written, host, port))
    return found


def look_at(written: str, host: str, port: int | None) -> Server:
    """Resolve `host` and open a TCP connection to `port` (Kafka's 9092 when none is given)."""
    try:
        addresses = socket.getaddrinfo(host, port or 9092, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        unknown = exc.errno in _NO_SUCH_NAME
        why = "does not resolve" if unknown else "could not be resolved now"
        return Server(written, f"the host name {host} {why} ({exc.strerror})", unknown)
    last = "no address"
    for family, kind, proto, _, where in addresses:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(PROBE_TIMEOUT_S)
                sock.connect(where)
                return Server(written, None)
        except ConnectionRefusedError:
            last = f"{_shown(where)} refuses connections: nothing listens on that port"
        except TimeoutError:
            last = f"{_shown(where)} does not answer (no reply within {PROBE_TIMEOUT_S:.0f} s)"
        except OSError as exc:
            last = f"{_shown(where)}: {exc.strerror or exc}"
    return Server(written, last)


def diagnose(bootstrap_servers: str) -> list[Server]:
    """What each entry of --bootstrap-servers is, as far as DNS and TCP can tell."""
    return [look_at(*server) for server in servers_of(bootstrap_servers)]


def unknown_names_error(servers: list[Server]) -> BrokerAddressUnknown | None:
    """The error to stop on when no host name of --bootstrap-servers exists; None otherwise."""
    if not servers or not all(server.unknown_name for server in servers):
        return None
    names = "; ".join(str(server.problem) for server in servers)
    return BrokerAddressUnknown(
        f"--bootstrap-servers {','.join(s.address for s in servers)}: {names}; check the name "
        "(a typo?)"
    )


def explained(servers: list[Server], client_reason: str) -> str:
    """Why an attempt failed: what DNS and TCP found, else (every address connects) the Kafka
    client's own reason, which then is about the protocol."""
    problems = [f"{s.address}: {s.problem}" for s in servers if s.problem is not None]
    if problems and len(problems) == len(servers):
        return "; ".join(problems)
    return (
        f"{client_reason}; the address takes TCP connections but no Kafka broker answered "
        "there (the wrong port, or a listener that needs -X security.protocol=...)"
    )


def backoff_s(attempt: int, first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S) -> float:
    """1, 2, 4, 8, 15, 15, ... seconds for attempt 0, 1, 2, ..."""
    return min(max_s, first_s * 2 ** min(attempt, 16))


def wait_for_broker(
    admin_config: dict[str, Any],
    timeout_s: float,
    should_stop: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
    at_start: bool = True,
) -> bool:
    """Until a broker at `bootstrap.servers` answers a metadata request: True; False when a
    stop was requested meanwhile. One log line per failed attempt, saying what was found at the
    address; `BrokerUnavailable` after `timeout_s`. `at_start`: a host name that does not exist
    is a configuration error, raised at once (`BrokerAddressUnknown`); after an outage it is
    waited for like any other failure (a name can vanish while a broker is replaced)."""
    servers = admin_config["bootstrap.servers"]
    if at_start and (unknown := unknown_names_error(diagnose(servers))) is not None:
        raise unknown
    # Its own client, silent: the attempts are reported here, one line each.
    # the stub types config values as scalars; librdkafka's `logger` takes a logging.Logger
    admin = AdminClient({**admin_config, "logger": _silent()})  # type: ignore[dict-item]
    began = time.monotonic()
    attempt = 0
    while not should_stop():
        found = diagnose(servers)
        # No address takes a connection: a Kafka attempt would only wait out its timeout.
        if any(server.problem is None for server in found):
            try:
                admin.list_topics(timeout=ATTEMPT_TIMEOUT_S)
                if attempt:
                    log.info("broker at --bootstrap-servers %s answers again", servers)
                return True
            except KafkaException as exc:
                reason = explained(found, exc.args[0].str() if exc.args else str(exc))
        else:
            reason = explained(found, "")
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


def _shown(where: tuple[Any, ...]) -> str:
    """A socket address as `host:port` (`[v6]:port`)."""
    host, port = where[0], where[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
