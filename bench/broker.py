"""The broker the bench runs against, and the topics it makes there."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hydrator.demo.publish import publish
from hydrator.kafka.admin import TopicSpec, ensure_topics
from hydrator.kafka.local_broker import LocalBroker

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
class Broker:
    bootstrap_servers: str
    local: bool  # the throwaway Tansu broker (memory storage) this run started
    pid: int | None = None  # of the local broker, whose CPU the bench samples

    @property
    def kind(self) -> str:
        return "local Tansu (memory storage)" if self.local else "given (--bootstrap-servers)"


@contextmanager
def broker(bootstrap_servers: str | None) -> Iterator[Broker]:
    if bootstrap_servers:
        yield Broker(bootstrap_servers, local=False)
        return
    with LocalBroker().start(timeout_s=60) as local:
        yield Broker(local.bootstrap_servers, local=True, pid=local.pid)


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_topics(admin, [TopicSpec(name, partitions, TOPIC_CONFIG) for name in names])


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Deletes topics the bench no longer needs (Tansu frees their memory); best effort."""
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
    on_record: Callable[[], None],
) -> int:
    """Produces (key, value) records as Kafka Connect places them; returns the count."""

    def records() -> Iterator[tuple[bytes, bytes, tuple[()]]]:
        for key, value in events:
            on_record()
            yield key, value, ()

    return len(publish(bootstrap, topic, records()))
