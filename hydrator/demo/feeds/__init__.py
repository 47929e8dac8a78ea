"""Generated changefeeds of the sources other than Debezium Postgres, for `hydrator demo
--source ydb|cockroachdb|cassandra`.

Each feed is written from its source's documented message shapes, without the hydrator's codecs,
and knows for every record the enriched value the hydrator must write (`expected`; None for a
record it must drop, such as a redelivered copy). The demo publishes a feed, hydrates it with
`--format auto`, shows a few telling records raw vs enriched, and checks every output against
`expected` (`mismatches`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from hydrator.core.records import HEADER_SOURCE
from hydrator.demo.show import Pair
from hydrator.events import RawRecord


@dataclass(frozen=True)
class FeedRecord:
    key: bytes | None
    value: bytes | None
    partition: int | None  # None: the Java producer's murmur2 of the key (Kafka Connect)
    expected: bytes | None  # the enriched value; None: the hydrator must write nothing for it
    kind: str  # insert, update, delete, duplicate, resolved...


@dataclass(frozen=True)
class Showcase:
    title: str
    pair: Pair
    note: str


class Feed(Protocol):
    name: str  # the source, as `--source` and `--format` name it
    label: str  # how the demo's text names the source ("YDB")
    topic: str
    origin: str  # what would have produced the records
    takes_schemas: bool  # whether the source has Kafka Connect's schema envelope (`--schemas`)

    def records(self, events: int, partitions: int) -> list[FeedRecord]:
        """At least `events` records of a generated history, in publishing order."""
        ...

    def pick(self, pairs: Sequence[Pair]) -> list[Showcase]:
        """The two or three records worth showing raw vs enriched."""
        ...


def mismatches(enriched: Sequence[RawRecord], expected: Mapping[str, bytes | None]) -> list[str]:
    """Every output that differs from its expected value (compared as JSON documents), every
    output for a record that should have written none, and every record without its output."""
    problems: list[str] = []
    seen: set[str] = set()
    for record in enriched:
        raw_source = record.header(HEADER_SOURCE)
        source = raw_source.decode() if raw_source else "?"
        if source in seen:
            problems.append(f"{source}: written twice")
        seen.add(source)
        if source not in expected:
            problems.append(f"{source}: no such input record")
            continue
        want = expected[source]
        if want is None:
            problems.append(f"{source}: written, but should have been dropped")
        elif _document(record.value) != _document(want):
            problems.append(f"{source}: differs from the expected record")
    missing = sorted(s for s, want in expected.items() if want is not None and s not in seen)
    problems += [f"{source}: no enriched record" for source in missing]
    return problems


def _document(value: bytes | None) -> object:
    return None if value is None else orjson.loads(value)


def feed_for(name: str, seed: int, schemas: bool = False) -> Feed:
    """The feed `--source name` generates; ValueError when it has no `--schemas` envelope."""
    feed = FEEDS[name](seed)
    if schemas and not feed.takes_schemas:
        raise ValueError(f"--schemas: {feed.label} messages have no schema envelope")
    return feed


def _cockroachdb(seed: int) -> Feed:
    from hydrator.demo.feeds.cockroachdb import CockroachFeed

    return CockroachFeed(seed)


def _cassandra(seed: int) -> Feed:
    from hydrator.demo.feeds.cassandra import CassandraFeed

    return CassandraFeed(seed)


def _ydb(seed: int) -> Feed:
    from hydrator.demo.feeds.ydb import YdbFeed

    return YdbFeed(seed)


FEEDS: dict[str, Callable[[int], Feed]] = {
    "ydb": _ydb,
    "cockroachdb": _cockroachdb,
    "cassandra": _cassandra,
}
