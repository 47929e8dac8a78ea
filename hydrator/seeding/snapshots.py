"""The snapshot a table was bootstrapped in, kept for the whole input topic (docs/cold-start.md).

A bootstrap from Postgres marks every image it writes with its snapshot, but a row deleted or
re-keyed before the snapshot is not in it: its key gets no image, and its events, read after the
bootstrap, would be placed against nothing. So the bootstrap also records the table's snapshot
(hydrator.core.visibility.TableMark: the snapshot and the write-ahead log's position when it was
taken) in the internal topic `<application-id>-snapshots`, compacted, one partition, keyed by
the input topic, after every row is written. Both engines read it when they start and give the
marks of their inputs to the core (HydrationSettings.table_snapshots), so the rule holds after
every restart. A later bootstrap of the same input replaces the mark (its snapshot is later and
holds every transaction the earlier one did).

The value is JSON: `{"version": 1, "table": ..., "snapshot": "xmin:xmax:xip,...",
"log_position": <LSN as an integer>}`; a value that cannot be read is skipped with a warning
(the keys of that input are then hydrated as if it had none).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from confluent_kafka.admin import AdminClient

from hydrator.core.visibility import SourceSnapshot, TableMark, table_mark
from hydrator.kafka.acknowledged_writer import AcknowledgedWriter
from hydrator.kafka.admin import TopicSpec, ensure_topics, partition_counts
from hydrator.kafka.client_config import ClientSettings
from hydrator.kafka.topic_reader import read_to_end
from hydrator.topology.layout import internal_topic

log = logging.getLogger(__name__)

VERSION = 1


def snapshots_topic(application_id: str) -> str:
    return internal_topic(application_id, "snapshots")


def snapshots_topic_spec(application_id: str) -> TopicSpec:
    return TopicSpec(snapshots_topic(application_id), 1, {"cleanup.policy": "compact"})


def encode_mark(table: str, snapshot: SourceSnapshot, log_position: int) -> bytes:
    document = {
        "version": VERSION,
        "table": table,
        "snapshot": str(snapshot),
        "log_position": log_position,
    }
    return json.dumps(document, sort_keys=True).encode()


def decode_mark(value: bytes) -> TableMark:
    """The table mark in a record of the snapshots topic; ValueError when it is not one."""
    document = json.loads(value)
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise ValueError("not a table snapshot of version 1")
    position = document.get("log_position")
    if type(position) is not int or position < 0:
        raise ValueError(f"log_position {position!r} is not an LSN")
    snapshot = document.get("snapshot")
    if not isinstance(snapshot, str):
        raise ValueError("no snapshot")
    return table_mark(SourceSnapshot.parse(snapshot), position)


def write_mark(
    clients: ClientSettings,
    application_id: str,
    input_topic: str,
    table: str,
    snapshot: SourceSnapshot,
    log_position: int,
) -> None:
    """Record `input_topic`'s table snapshot (created the topic when absent); returns once the
    broker acknowledged it."""
    ensure_topics(AdminClient(clients.admin()), [snapshots_topic_spec(application_id)])
    writer = AcknowledgedWriter(clients, "table snapshot")
    value = encode_mark(table, snapshot, log_position)
    writer.produce(snapshots_topic(application_id), input_topic.encode(), value, 0)
    writer.close()


def read_marks(
    clients: ClientSettings, application_id: str, inputs: Iterable[str]
) -> tuple[tuple[str, TableMark], ...]:
    """The table marks of `inputs` that the application's snapshots topic holds (none when the
    topic does not exist: no bootstrap from Postgres ever ran)."""
    topic = snapshots_topic(application_id)
    if partition_counts(AdminClient(clients.admin()), [topic])[topic] is None:
        return ()
    wanted = set(inputs)
    marks: dict[str, TableMark] = {}
    config = clients.consumer({"group.id": f"{application_id}-snapshots"})
    for message in read_to_end(config, topic):
        key, value = message.key(), message.value()
        if key is None:
            continue
        name = key.decode(errors="replace")
        if name not in wanted:
            continue
        if value is None:
            marks.pop(name, None)
            continue
        try:
            marks[name] = decode_mark(value)
        except ValueError as exc:
            log.warning("%s: skipping the table snapshot of %s: %s", topic, name, exc)
    for name, mark in sorted(marks.items()):
        log.info("input %s: bootstrapped in snapshot %s (log position %d)", name,
                 SourceSnapshot.from_mark(mark[1:]), mark[0])  # fmt: skip
    return tuple(sorted(marks.items()))
