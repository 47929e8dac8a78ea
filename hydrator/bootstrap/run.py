"""`hydrator state bootstrap`: fill an application's state from a source of full rows before (or
while) it runs (docs/cold-start.md). The readers (postgres.py, a topic) give full rows,
hydrator/seeding/images.py makes them state records, the engine's target (embedded.py) stores
them where a run reads them.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hydrator import exact
from hydrator.bootstrap.embedded import BootstrapRefused
from hydrator.bootstrap.postgres import TableError, read_table
from hydrator.events import ChangeEvent, Codec, RawRecord, Read
from hydrator.formats.keys import canonical
from hydrator.kafka.admin import group_is_active
from hydrator.kafka.client_config import ClientSettings
from hydrator.kafka.reachability import wait_for_broker
from hydrator.kafka.topic_reader import read_to_end
from hydrator.postgres.debezium_values import ConnectorSettings, UnsupportedColumn
from hydrator.seeding import images, snapshots
from state.record import StateRecord

log = logging.getLogger(__name__)

__all__ = ["BootstrapRefused", "Summary", "from_postgres", "from_topic", "refuse_if_running"]


class Target(Protocol):
    """Where an engine's state goes (embedded.py, spark.py)."""

    clients: ClientSettings
    application_id: str
    input_topic: str
    written: int
    kept: int

    def offer(self, key: str, route: bytes, record: StateRecord) -> bool: ...

    def close(self) -> None: ...


@dataclass
class Summary:
    """What one bootstrap did: rows read, their bytes (as JSON), keys written and kept (the
    stored state was the stream's, or already the same), records skipped, seconds taken."""

    source: str
    rows: int = 0
    bytes: int = 0
    written: int = 0
    kept: int = 0
    skipped: int = 0
    seconds: float = 0.0
    snapshot: str | None = None

    def line(self) -> str:
        rate = self.rows / self.seconds if self.seconds else 0.0
        text = (
            f"bootstrapped {self.source}: {self.rows} rows, {self.bytes / 1e6:.1f} MB in "
            f"{self.seconds:.1f} s ({rate:.0f} rows/s); {self.written} keys written, "
            f"{self.kept} kept"
        )
        if self.skipped:
            text += f", {self.skipped} records skipped"
        if self.snapshot is not None:
            text += f"; snapshot {self.snapshot}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rows": self.rows,
            "bytes": self.bytes,
            "bootstrapped_keys": self.written,
            "kept_keys": self.kept,
            "skipped_records": self.skipped,
            "seconds": round(self.seconds, 3),
            "snapshot": self.snapshot,
        }


def require_broker(clients: ClientSettings, timeout_s: float) -> None:
    """Wait up to `timeout_s` for a broker at --bootstrap-servers to answer; `BrokerUnavailable`
    (naming the servers and librdkafka's last error) when none does, before anything is read."""
    wait_for_broker(clients.admin(), timeout_s, lambda: False)


def refuse_if_running(clients: ClientSettings, application_id: str) -> None:
    """A run of the application changes its state as the bootstrap writes: refuse."""
    if group_is_active(clients.admin(), application_id):
        raise BootstrapRefused(
            f"--application-id {application_id}: the application is running (its consumer "
            "group has members); stop it before bootstrapping its state (after a crash, the "
            "group lets go of its members once their session times out)"
        )


def _progress(total: int | None, what: str) -> Any:
    """A progress bar on a terminal (tqdm), else nothing."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit=" rows", desc=what, file=sys.stderr)


# -- from Postgres ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyShape:
    """How the input topic's keys are written: a Kafka Connect schema envelope (its `schema`)
    or bare JSON. A key's partition depends on its exact bytes."""

    schema: Any = None
    field_order: tuple[str, ...] | None = None

    def raw(self, key: Mapping[str, Any]) -> bytes:
        if self.field_order is not None:
            key = {name: key[name] for name in self.field_order}
        if self.schema is None:
            return exact.dumps(dict(key))
        return exact.dumps({"schema": self.schema, "payload": dict(key)})


def learn_key_shape(
    clients: ClientSettings, application_id: str, input_topic: str, connector: Mapping[str, str]
) -> KeyShape:
    """The key envelope of the input topic's first keyed record; without one, what the
    connector settings say (`key.converter.schemas.enable`)."""
    config = clients.consumer({"group.id": f"{application_id}-bootstrap"})
    for message in read_to_end(config, input_topic):
        raw = message.key()
        if raw is None:
            continue
        document = exact.loads(raw)
        if isinstance(document, dict) and document.keys() == {"schema", "payload"}:
            return KeyShape(document["schema"], tuple(document["payload"]))
        if isinstance(document, dict):
            return KeyShape(None, tuple(document))
        break
    if connector.get("key.converter.schemas.enable", "false").lower() == "true":
        raise BootstrapRefused(
            f"--input-topic {input_topic}: no record yet to learn the key's schema envelope "
            "from (key.converter.schemas.enable=true); bootstrap once the first event is in, "
            "or with keys without schemas"
        )
    return KeyShape()


def from_postgres(
    target: Target,
    dsn: str,
    table: str,
    connector: Mapping[str, str],
    key_shape: KeyShape,
    now_ms: int | None = None,
) -> Summary:
    """Read `table` in one snapshot and offer every row to `target`."""
    try:
        settings = ConnectorSettings.from_config(connector)
    except UnsupportedColumn as exc:
        raise BootstrapRefused(f"--connector-config: {exc}") from None
    summary = Summary(f"postgres table {table}")
    began = time.monotonic()
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    try:
        for rows in read_table(dsn, table, settings):
            summary.snapshot = str(rows.snapshot)
            bar = _progress(rows.count, table)
            for row in rows.rows:
                key = {name: row[name] for name in rows.key_columns}
                record = images.snapshot_row(row, rows.snapshot, now)
                target.offer(canonical(key), key_shape.raw(key), record)
                summary.rows += 1
                summary.bytes += len(exact.dumps(row))
                if bar is not None:
                    bar.update()
            if bar is not None:
                bar.close()
            target.close()
            # last: the mark says every row of the snapshot is in the state
            snapshots.write_mark(
                target.clients,
                target.application_id,
                target.input_topic,
                table,
                rows.snapshot,
                rows.log_position,
            )
    except TableError as exc:
        raise BootstrapRefused(str(exc)) from None
    summary.written, summary.kept = target.written, target.kept
    summary.seconds = time.monotonic() - began
    return summary


# -- from a topic of full rows -------------------------------------------------------------------


def from_topic(
    target: Target,
    clients: ClientSettings,
    application_id: str,
    topic: str,
    codec: Codec,
    now_ms: int | None = None,
) -> Summary:
    """Read `topic` (full rows in `codec`'s format) to its end, fold each key's rows, offer the
    results to `target`. Records without a Kafka key are skipped: their key's partition is
    unknown."""
    summary = Summary(f"topic {topic}")
    began = time.monotonic()
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    states: dict[str, tuple[bytes, StateRecord | None]] = {}
    config = clients.consumer({"group.id": f"{application_id}-bootstrap"})
    bar = _progress(None, topic)
    for message in read_to_end(config, topic):
        summary.rows += 1
        summary.bytes += len(message.value() or b"")
        if bar is not None:
            bar.update()
        headers: Any = message.headers() or ()  # a list of (name, bytes) from a consumer
        raw = RawRecord(
            target.input_topic,
            message.partition() or 0,
            message.offset() or 0,
            message.key(),
            message.value(),
            tuple(headers),
        )
        # a record without a Kafka key (YDB) cannot be placed in the input's partition
        event = _event(codec, raw) if raw.key is not None else None
        if event is None:
            if raw.value is not None:
                summary.skipped += 1
            continue
        key, change = event
        route = raw.key
        assert route is not None
        previous = states.get(key, (route, None))[1]
        states[key] = (route, images.fold_full_row(previous, change, now))
    if bar is not None:
        bar.close()
    for key, (route, state) in states.items():
        if state is not None:
            target.offer(key, route, state)
    target.close()
    summary.written, summary.kept = target.written, target.kept
    summary.seconds = time.monotonic() - began
    return summary


def _event(codec: Codec, raw: RawRecord) -> tuple[str, ChangeEvent] | None:
    """The record's canonical key and change; None for one without either (tombstones, bad
    records)."""
    try:
        read = Read(raw)  # one parse for both
        key = codec.key(read)
        decoded = codec.decode(read)
    except Exception as exc:  # whatever the record holds: skipped, counted
        log.debug("skipped %s: %s", raw.source, exc)
        return None
    if key is None or not isinstance(decoded, ChangeEvent):
        return None
    return key, decoded
