"""`hydrator state inspect|stats`: what an embedded engine keeps in its local stores.

The stores are `<state-dir>/<application-id>/<application-id>-state-<p>/`, one RocksDB per task
(hydrator/engines/embedded/state_dir.py). They are opened read-only: RocksDB's read-only mode
takes no lock and reads the write-ahead log as well, so it works beside a running instance and
sees what that instance had written when the store was opened. Nothing here writes to a store.
The Spark engine keeps its state in Spark's state store inside the checkpoint, which these tools
do not read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import AccessType, Options, Rdict

from hydrator.engines.embedded.clock import CLOCK_KEY, decode_reading
from hydrator.errors import ConfigurationError, HydratorError
from hydrator.events import RawRecord
from hydrator.formats import codec_for
from state.codec import StateFormatError, decode_state
from state.large import NOT_AT_HAND, LargeValue, is_store_key, store_key, unpack_value
from state.record import StateRecord, state_key
from state.stores.rocksdb import CHANGELOG_OFFSET_KEY, META_PREFIX

# A running instance may replace a store's files (a flush, a compaction) while they are being
# opened; opening again then finds the new set.
OPEN_ATTEMPTS = 3
OPEN_RETRY_S = 0.2


class StateToolError(ConfigurationError):
    """Exit 2: the message names the option that is wrong."""


class StoreUnreadable(HydratorError):
    """Exit 1: a store exists but RocksDB cannot open or read it."""


@dataclass(frozen=True)
class TaskStore:
    partition: int
    path: Path


def application_dir(state_dir: Path, application_id: str) -> Path:
    return Path(state_dir) / application_id


def task_stores(state_dir: Path, application_id: str) -> list[TaskStore]:
    """The task stores of the application, by partition (stores moved aside as damaged are
    left out)."""
    root = application_dir(state_dir, application_id)
    if not root.is_dir():
        raise StateToolError(
            f"--state-dir / --application-id: no embedded-engine state at {root} (no directory)"
        )
    prefix = f"{application_id}-state-"
    stores = [
        TaskStore(int(path.name[len(prefix) :]), path)
        for path in root.iterdir()
        if path.is_dir() and path.name.startswith(prefix) and path.name[len(prefix) :].isdigit()
    ]
    if not stores:
        raise StateToolError(
            f"--state-dir / --application-id: {root} holds no task store ({prefix}<partition>)"
        )
    return sorted(stores, key=lambda store: store.partition)


def holder_pid(state_dir: Path, application_id: str) -> int | None:
    """The process holding the application directory's lock (a running instance), read from
    /proc/locks so that the lock itself is never touched; None when free or unknown."""
    lock = application_dir(state_dir, application_id) / ".lock"
    try:
        st = lock.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 31759 fe:00:2154576 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            return int(fields[4])
    return None


def open_read_only(path: Path) -> Rdict:
    error: Exception | None = None
    for attempt in range(OPEN_ATTEMPTS):
        if attempt:
            time.sleep(OPEN_RETRY_S)
        try:
            return Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
        except Exception as exc:  # rocksdict raises plain Exception("IO error: ...")
            error = exc
    raise StoreUnreadable(f"cannot open the store {path} read-only: {error}")


# -- inspect -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyState:
    """One key's stored state, as `state inspect` prints it."""

    partition: int
    topic: str
    key: str
    state_bytes: int
    image: Any = None
    position: list[int] | None = None
    deleted: bool = False
    updated_at_ms: int = 0  # on the task's processing clock, not the wall clock
    parked: int = 0  # records waiting for a key change's old image
    parked_bytes: int = 0
    awaiting: str | None = None  # the old key whose handoff they wait for
    waiting_handoffs: int = 0  # old images that arrived before their CREATE
    waiting_since_ms: int | None = None
    unreadable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_key(text: str, format_name: str = "auto", input_topic: str | None = None) -> str:
    """The key the engine stores a record's state under when the record's Kafka key is `text`:
    the format's codec names it (for Debezium, the key JSON's canonical spelling, bare or in a
    schema envelope)."""
    codec = codec_for(format_name)
    try:
        # A record without a value: `auto` names its state by the Kafka key, which is also how
        # every format it knows spells a key (YDB's `key` array included).
        key = codec.key(RawRecord(input_topic or "", 0, 0, text.encode(), None))
    except ValueError as exc:  # InvalidKey, BadInput
        raise StateToolError(f"--key: {exc}") from None
    if key is None and not codec.key_in_record_key:
        raise StateToolError(
            f"--key: the {codec.name} format keeps a row's identity in the value, not the key"
        )
    if key is None:
        raise StateToolError(f"--key: the {codec.name} format finds no key in {text!r}")
    return key


def inspect_key(
    stores: list[TaskStore], key: str, input_topic: str | None = None
) -> list[KeyState]:
    """The state of canonical `key` in every store that has it, under `input_topic` or under
    every input topic the stores hold."""
    found = []
    for store in stores:
        db = open_read_only(store.path)
        try:
            topics = [input_topic] if input_topic else list(_topics(db))
            for topic in topics:
                data = db.get(state_key(topic, key))
                if data is not None:
                    reader = _StoreValues(db, state_key(topic, key))
                    found.append(_key_state(store.partition, topic, key, data, reader))
        finally:
            db.close()
    return found


def _topics(db: Rdict) -> Iterator[str]:
    """The input topics a store holds states of, one seek each: keys are `topic\\x00key`, so
    every key of topic T sorts between `T\\x00` and `T\\x01`."""
    it = db.iter()
    it.seek(META_PREFIX + b"\xff")  # past the meta records, which start with NUL
    while it.valid():
        topic = bytes(it.key()).split(b"\x00", 1)[0]
        yield topic.decode(errors="replace")
        it.seek(topic + b"\x01")


class _StoreValues:
    """Reads a row's large values (state/large.py) from a read-only store."""

    def __init__(self, db: Rdict, owner: bytes) -> None:
        self._db = db
        self._owner = owner

    def read(self, ref: LargeValue) -> Any:
        blob = self._db.get(store_key(self._owner, ref.digest))
        if blob is None:
            raise StateFormatError(f"large value {ref.digest.hex()} is missing from the store")
        return unpack_value(blob)

    def peek(self, ref: LargeValue) -> Any:
        return NOT_AT_HAND


def _key_state(partition: int, topic: str, key: str, data: bytes, reader: _StoreValues) -> KeyState:
    try:
        record = decode_state(data, reader)
        image = dict(record.image) if record.image is not None else None
    except (StateFormatError, ValueError) as exc:
        return KeyState(partition, topic, key, len(data), unreadable=str(exc))
    return KeyState(
        partition,
        topic,
        key,
        len(data),
        image=image,
        position=list(record.pos) if record.pos is not None else None,
        deleted=record.deleted,
        updated_at_ms=record.updated_at_ms,
        parked=len(record.parked),
        parked_bytes=_parked_bytes(record),
        awaiting=record.awaiting,
        waiting_handoffs=len(record.handoffs),
        waiting_since_ms=record.waiting_since_ms,
    )


def _parked_bytes(record: StateRecord) -> int:
    return sum(len(p.key or b"") + len(p.value or b"") for p in record.parked)


# -- stats -------------------------------------------------------------------------------------


@dataclass
class StoreStats:
    partition: int | None  # None for the totals
    keys: int = 0
    bytes: int = 0  # keys and encoded states, with their large values
    large_values: int = 0  # column values kept apart from their rows, compressed
    tombstones: int = 0  # deleted rows kept to drop late older events
    parked_keys: int = 0  # keys whose records wait for a key change's old image
    parked_records: int = 0
    waiting_handoffs: int = 0  # old images that arrived before their CREATE
    unreadable: int = 0  # states this release cannot decode
    changelog_offset: int | None = None  # where a restore would resume
    clock_ms: int | None = None  # the task's saved processing-clock reading
    disk_bytes: int = 0  # the store directory's files
    topics: dict[str, int] = field(default_factory=dict)  # keys per input topic

    def add(self, other: StoreStats) -> None:
        for name in (
            "keys",
            "bytes",
            "large_values",
            "tombstones",
            "parked_keys",
            "parked_records",
            "waiting_handoffs",
            "unreadable",
            "disk_bytes",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for topic, n in other.topics.items():
            self.topics[topic] = self.topics.get(topic, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def store_stats(store: TaskStore) -> StoreStats:
    stats = StoreStats(store.partition, disk_bytes=_disk_bytes(store.path))
    db = open_read_only(store.path)
    try:
        offset = db.get(CHANGELOG_OFFSET_KEY)
        stats.changelog_offset = int(offset) if offset is not None else None
        stats.clock_ms = decode_reading(db.get(CLOCK_KEY))
        for raw_key, data in db.items():
            key = bytes(raw_key)
            if is_store_key(key):
                stats.large_values += 1
                stats.bytes += len(key) + len(data)
                continue
            if key.startswith(META_PREFIX):
                continue
            topic = key.split(b"\x00", 1)[0].decode(errors="replace")
            stats.topics[topic] = stats.topics.get(topic, 0) + 1
            stats.keys += 1
            stats.bytes += len(key) + len(data)
            try:
                record = decode_state(data)
            except StateFormatError:
                stats.unreadable += 1
                continue
            stats.tombstones += record.deleted
            stats.parked_keys += bool(record.parked)
            stats.parked_records += len(record.parked)
            stats.waiting_handoffs += len(record.handoffs)
    except ValueError as exc:
        raise StoreUnreadable(f"{store.path}: unreadable changelog offset: {exc}") from None
    except StoreUnreadable:
        raise
    except Exception as exc:  # rocksdict: Exception("Corruption: ...") while reading
        raise StoreUnreadable(f"{store.path}: {exc}") from None
    finally:
        db.close()
    return stats


def all_stats(stores: list[TaskStore]) -> tuple[list[StoreStats], StoreStats]:
    per_store = [store_stats(store) for store in stores]
    totals = StoreStats(None)
    for stats in per_store:
        totals.add(stats)
    return per_store, totals


def _disk_bytes(path: Path) -> int:
    total = 0
    for entry in path.iterdir():
        try:
            total += entry.stat().st_size if entry.is_file() else 0
        except OSError:  # removed meanwhile by a running instance
            continue
    return total


_COLUMNS = (
    ("partition", "partition"),
    ("keys", "keys"),
    ("bytes", "bytes"),
    ("large_values", "large values"),
    ("tombstones", "tombstones"),
    ("parked_keys", "parked keys"),
    ("parked_records", "parked records"),
    ("waiting_handoffs", "waiting handoffs"),
    ("unreadable", "unreadable"),
    ("changelog_offset", "changelog offset"),
    ("disk_bytes", "disk bytes"),
)


def stats_table(per_store: list[StoreStats], totals: StoreStats) -> str:
    """A plain table: a row per task store, then the totals, then keys per input topic."""
    rows = [[title for _, title in _COLUMNS]]
    for stats in [*per_store, totals]:
        values = stats.to_dict()
        values["partition"] = "total" if stats.partition is None else stats.partition
        rows.append(["-" if values[name] is None else str(values[name]) for name, _ in _COLUMNS])
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    for topic, keys in sorted(totals.topics.items()):
        lines.append(f"input topic {topic}: {keys} keys")
    return "\n".join(lines)
