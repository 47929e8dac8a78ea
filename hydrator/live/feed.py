"""Reads the enriched topics as a downstream consumer would: committed records only
(`read_committed`, so a transaction the hydrator aborted is never shown), no state of its own
beyond what the page displays."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaError

from hydrator.events import BadInput, Codec, InvalidKey, RawRecord
from hydrator.kafka import consumed
from hydrator.live.rows import RowChange, row_change

log = logging.getLogger(__name__)

POLL_S = 0.5


def consumer_config(bootstrap_servers: str, from_beginning: bool) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap_servers,
        # every start reads afresh: the page shows the topic, it keeps no position
        "group.id": f"hydrator-live-{uuid.uuid4().hex[:12]}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        # see an output topic the hydrator creates after this started within seconds
        "topic.metadata.refresh.interval.ms": 5000,
    }


def run_feed(
    bootstrap_servers: str,
    topics: Sequence[str],
    codec: Codec,
    preview_chars: int,
    deliver: Callable[[RowChange], None],
    stop: threading.Event,
    from_beginning: bool = True,
) -> None:
    """Poll until `stop` is set, handing every row change to `deliver`. A record the codec
    cannot read is skipped with a warning naming it: one bad record must not blank the page."""
    consumer = Consumer(consumer_config(bootstrap_servers, from_beginning))
    consumer.subscribe(list(topics))
    reported: set[str] = set()
    try:
        while not stop.is_set():
            message = consumer.poll(POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                # an unknown topic is reported until it is created; say so once
                if str(error) not in reported:
                    reported.add(str(error))
                    log.warning("consumer: %s", error)
                continue
            record = RawRecord(
                consumed.topic(message),
                consumed.partition(message),
                consumed.offset(message),
                message.key(),
                message.value(),
                tuple(consumed.headers(message) or ()),
            )
            try:
                change = row_change(record, codec, preview_chars)
            except (BadInput, InvalidKey) as exc:
                log.warning("skipped %s: %s: %s", record.source, type(exc).__name__, exc)
                continue
            if change is not None:
                deliver(change)
    finally:
        consumer.close()
