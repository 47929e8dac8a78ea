"""Exactly once as a read_committed consumer sees it: every record the engine writes names the
input record it came from (`hydrator.source`), and in an output topic, the dead-letter topic and
the handoff topic no source may appear twice.

On a broker that honours transactions (Apache Kafka) that is asserted. On Tansu, where a dead
transaction's records stay visible (docs/tansu.md), a repeat is tolerated only as an identical
copy: same partition, key, value and headers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from hydrator.core.records import HEADER_SOURCE
from hydrator.topology.layout import internal_topic
from tests.harness.kafka import Broker
from tests.harness.topics import Consumed, read_topic, topic_exists


def by_source(records: Iterable[Consumed]) -> dict[str, list[Consumed]]:
    """Each `hydrator.source` and the records that name it, in read order (a record without
    one fails: everything the engine writes names its source)."""
    copies: dict[str, list[Consumed]] = defaultdict(list)
    for record in records:
        source = record.header(HEADER_SOURCE)
        assert source is not None, (
            f"{record.topic}:{record.partition}:{record.offset} has no {HEADER_SOURCE}"
        )
        copies[source.decode()].append(record)
    return copies


def repeats(broker: Broker, records: Iterable[Consumed], topic: str) -> int:
    """How many records of `topic` repeat a source already seen: asserts there are none on a
    broker that honours transactions, and that each is an identical copy on one that does not."""
    records = list(records)
    if broker.honours_transactions:
        repeated = {src: outs for src, outs in by_source(records).items() if len(outs) > 1}
        assert not repeated, (
            f"{topic}: {len(repeated)} sources written more than once under read_committed, "
            f"e.g. {_shown(repeated)}"
        )
        return 0
    return identical_repeats(records, topic)


def identical_repeats(records: Iterable[Consumed], topic: str) -> int:
    """How many records of `topic` repeat a source already seen, each asserted to be an
    identical copy (same partition, key, value and headers) of the first: at least once."""
    repeated = 0
    for src, (first, *again) in by_source(records).items():
        for other in again:
            assert _content(other) == _content(first), f"{topic}: {src} re-emitted differently"
        repeated += len(again)
    return repeated


def app_repeats(broker: Broker, application_id: str, outputs: Iterable[str]) -> int:
    """`repeats` over the output topics, the dead letters and the handoffs of one application
    (those of its topics that exist)."""
    bootstrap = broker.bootstrap_servers
    topics = [
        *outputs,
        internal_topic(application_id, "dlq"),
        internal_topic(application_id, "handoff"),
    ]
    return sum(
        repeats(broker, read_topic(bootstrap, topic, timeout_s=60), topic)
        for topic in topics
        if topic_exists(bootstrap, topic)
    )


def _content(record: Consumed) -> tuple[object, ...]:
    return (record.partition, record.key, record.value, record.headers)


def _shown(repeated: dict[str, list[Consumed]]) -> str:
    src, outs = next(iter(repeated.items()))
    return f"{src} at offsets {[(o.partition, o.offset) for o in outs]}"
