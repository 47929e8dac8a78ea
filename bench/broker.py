"""The broker the bench runs against, and the topics it makes there."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hydrator.demo.publish import publish
from hydrator.errors import ConfigurationError
from hydrator.kafka.admin import TopicSpec, ensure_topics
from hydrator.kafka.apache_kafka import ApacheKafka, check_distribution
from hydrator.kafka.local_broker import LocalBroker

KAFKA_HOME_VARIABLE = "HYDRATOR_KAFKA_HOME"

# Tansu's DescribeConfigs answers only the configs a topic was created with. Quix Streams reads
# the input's retention.ms to set up its changelog topic, so every topic the bench creates
# names it (-1: keep everything, as Tansu does anyway).
TOPIC_CONFIG = {"retention.ms": "-1"}
QUIX_RETENTION_NOTE = (
    "Quix Streams needs the input topic's retention.ms (it derives its changelog topic's "
    "settings from it); Tansu's DescribeConfigs returns no entries for configs a topic was not "
    "created with, so the bench creates its topics with retention.ms=-1."
)


@dataclass(frozen=True)
class BrokerChoice:
    """Where a bench run's broker comes from: one given by its address, else Apache Kafka
    started from a distribution, else a throwaway Tansu."""

    bootstrap_servers: str | None = None
    kafka_home: Path | None = None


def broker_choice(
    bootstrap_servers: str | None, kind: str | None, home: Path | None
) -> BrokerChoice:
    """From `--bootstrap-servers`, `--broker kafka|tansu` and `--kafka-home` (else
    $HYDRATOR_KAFKA_HOME): Apache Kafka when a distribution is given, unless tansu is asked
    for. ValueError names what is wrong."""
    if bootstrap_servers:
        return BrokerChoice(bootstrap_servers)
    named_by = "--kafka-home"
    if home is None and os.environ.get(KAFKA_HOME_VARIABLE):
        home, named_by = Path(os.environ[KAFKA_HOME_VARIABLE]), KAFKA_HOME_VARIABLE
    if kind == "tansu" or (home is None and kind is None):
        return BrokerChoice()
    if home is None:
        raise ValueError(
            f"--broker kafka needs an Apache Kafka distribution: --kafka-home DIR or "
            f"{KAFKA_HOME_VARIABLE}"
        )
    try:
        return BrokerChoice(kafka_home=check_distribution(home, named_by))
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class Broker:
    bootstrap_servers: str
    kind: str  # what the report names it
    pid: int | None = None  # of the local broker, whose CPU the bench samples


@contextmanager
def broker(choice: BrokerChoice) -> Iterator[Broker]:
    if choice.bootstrap_servers:
        yield Broker(choice.bootstrap_servers, "given (--bootstrap-servers)")
        return
    if choice.kafka_home is not None:
        with ApacheKafka(choice.kafka_home) as kafka:
            kind = f"local Apache Kafka {kafka.version} (single node, {choice.kafka_home})"
            yield Broker(kafka.bootstrap_servers, kind, pid=kafka.pid)
        return
    with LocalBroker().start(timeout_s=60) as local:
        yield Broker(local.bootstrap_servers, "local Tansu (memory storage)", pid=local.pid)


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_topics(admin, [TopicSpec(name, partitions, TOPIC_CONFIG) for name in names])


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Deletes topics the bench no longer needs (freeing Tansu's memory, Kafka's disk); best
    effort."""
    names = list(names)
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(names, operation_timeout=30).values():
        with suppress(KafkaException):
            future.result(60)


def preload(
    bootstrap: str,
    topic: str,
    events: Iterable[tuple[bytes, bytes]],
    on_record: Callable[[], object],
) -> int:
    """Produces (key, value) records as Kafka Connect places them; returns the count."""

    def records() -> Iterator[tuple[bytes, bytes, tuple[()]]]:
        for key, value in events:
            on_record()
            yield key, value, ()

    return len(publish(bootstrap, topic, records()))
