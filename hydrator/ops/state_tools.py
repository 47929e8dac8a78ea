"""`hydrator state inspect|stats`: what an embedded engine keeps in its local stores.

The stores are `<state-dir>/<application-id>/<application-id>-state-<p>/`, one RocksDB per task
(hydrator/engines/embedded/state_dir.py). They are opened read-only: RocksDB's read-only mode
takes no lock and reads the write-ahead log as well, so it works beside a running instance and
sees what that instance had written when the store was opened. Nothing here writes to a store.
Every read verifies RocksDB's block checksums, and every scan checks how it ended (rocksdict's
iterator stops at a damaged block as if the store ended there): a damaged store is reported as
damaged (exit 1, with the reason), never as an empty one. The keys' layout is state/layout.py's.
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

from rocksdict import AccessType, Options, Rdict, ReadOptions

from hydrator.errors import ConfigurationError, HydratorError
from hydrator.events import RawRecord, Read
from hydrator.formats import codec_for
from state.codec import StateFormatError, decode_state
from state.large import NOT_AT_HAND, LargeValue, refs_of, unpack_value
from state.layout import (
    CHANGELOG_OFFSET_KEY,
    CLOCK_KEY,
    FIRST_STATE_KEY,
    decode_offset,
    decode_reading,
    is_large_value_key,
    is_meta_key,
    large_value_key,
    state_key,
    topic_end,
    topic_of,
)
from state.record import StateRecord

# A running instance may replace a store's files (a flush, a compaction) while they are being
# opened; opening again then finds the new set.
OPEN_ATTEMPTS = 3
OPEN_RETRY_S = 0.2


class StateToolError(ConfigurationError):
    """Exit 2: the message names the option that is wrong."""


class StoreUnreadable(HydratorError):
    """Exit 1: a store exists but RocksDB cannot open or read it (damaged, or held)."""


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
    if path.exists() and not path.is_dir():
        raise StoreUnreadable(f"the store {path} is damaged: it is not a directory")
    error: Exception | None = None
    for attempt in range(OPEN_ATTEMPTS):
        if attempt:
            time.sleep(OPEN_RETRY_S)
        try:
            db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
        except Exception as exc:  # rocksdict raises plain Exception("IO error: ...")
            error = exc
            continue
        db.set_read_options(_checked_reads())
        return db
    raise StoreUnreadable(f"cannot open the store {path} read-only: {_reason(error)}")


def _checked_reads() -> ReadOptions:
    options = ReadOptions()
    options.set_verify_checksums(True)
    options.fill_cache(False)  # type: ignore[call-arg]  # rocksdict's stub lacks the flag
    return options


def _reason(error: BaseException | None) -> str:
    """A RocksDB error, with what it means when it means damage."""
    text = str(error)
    if "Corruption" in text or "No such file or directory" in text:
        return f"the store is damaged: {text}"
    return text


def _checked_items(db: Rdict, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
    """Every record from `start` on; raises StoreUnreadable when the scan stopped at damage
    rather than at the end."""
    it = db.iter(_checked_reads())
    it.seek(start)
    while it.valid():
        yield bytes(it.key()), bytes(it.value())
        it.next()
    it.status()


# -- inspect -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyState:
    """One key's stored state, as `state inspect` prints it."""

    partition: int
    topic: str
    key: str
    state_bytes: int
    image: Any = None
    unknown_columns: tuple[str, ...] = ()  # the row's columns the image lacks: values not known
    position: list[int] | None = None
    deleted: bool = False
    updated_at_ms: int = 0  # on the task's processing clock, not the wall clock
    parked: int = 0  # records waiting for a key change's old image
    parked_bytes: int = 0
    awaiting: str | None = None  # the old key whose handoff they wait for
    waiting_handoffs: int = 0  # old images that arrived before their CREATE
    waiting_since_ms: int | None = None
    unreadable: str | None = None

    def to_dict(self, value_chars: int | None = None) -> dict[str, Any]:
        """As `state inspect` prints it: with `value_chars`, every longer string in the image
        cut to that many characters, then a marker with its length (`--full-values`: None)."""
        shown = asdict(self)
        if value_chars is not None:
            shown["image"] = shortened(shown["image"], value_chars)
        return shown


# `state inspect`'s default: a TOASTed column holds kilobytes, which would bury the rest.
VALUE_CHARS = 200


def shortened(value: Any, chars: int) -> Any:
    """`value` with every string longer than `chars` cut, marked with its whole length:
    `"abc…" + " [… 8000 characters]"`; lists and objects inside are walked."""
    if isinstance(value, str) and len(value) > chars:
        return f"{value[:chars]}… [{len(value)} characters; --full-values shows all]"
    if isinstance(value, dict):
        return {name: shortened(item, chars) for name, item in value.items()}
    if isinstance(value, list):
        return [shortened(item, chars) for item in value]
    return value


def parse_key(text: str, format_name: str = "auto", input_topic: str | None = None) -> str:
    """The key the engine stores a record's state under when the record's Kafka key is `text`:
    the format's codec names it (for Debezium, the key JSON's canonical spelling, bare or in a
    schema envelope)."""
    codec = codec_for(format_name)
    try:
        # A record without a value: `auto` names its state by the Kafka key, which is also how
        # every format it knows spells a key (YDB's `key` array included).
        key = codec.key(Read(RawRecord(input_topic or "", 0, 0, text.encode(), None)))
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
        except StoreUnreadable:
            raise
        except Exception as exc:  # rocksdict: Exception("Corruption: ...") while reading
            raise StoreUnreadable(f"{store.path}: {_reason(exc)}") from None
        finally:
            db.close()
    return found


def _topics(db: Rdict) -> Iterator[str]:
    """The input topics a store holds states of, one seek each: keys are `topic\\x00key`, so
    every key of topic T sorts between `T\\x00` and `T\\x01`."""
    it = db.iter(_checked_reads())
    it.seek(FIRST_STATE_KEY)  # past the meta records and large values
    while it.valid():
        topic = topic_of(bytes(it.key()))
        yield topic.decode(errors="replace")
        it.seek(topic_end(topic))
    it.status()


class _StoreValues:
    """Reads a row's large values (state/large.py) from a read-only store."""

    def __init__(self, db: Rdict, owner: bytes) -> None:
        self._db = db
        self._owner = owner

    def read(self, ref: LargeValue) -> Any:
        blob = self._db.get(large_value_key(self._owner, ref.digest))
        if blob is None:
            raise StoreUnreadable(
                f"the store is damaged: large value {ref.digest.hex()} of a row is missing"
            )
        return unpack_value(blob)

    def peek(self, ref: LargeValue) -> Any:
        return NOT_AT_HAND

    def holds(self, ref: LargeValue, packed: bytes) -> bool:
        return False  # the tools only read


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
        unknown_columns=record.unknown,
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
    large_values: int = 0  # column values kept apart from their rows
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
    referenced: set[bytes] = set()
    stored_values: set[bytes] = set()
    try:
        stats.changelog_offset = decode_offset(db.get(CHANGELOG_OFFSET_KEY))
        stats.clock_ms = decode_reading(db.get(CLOCK_KEY))
        for key, data in _checked_items(db):
            if is_large_value_key(key):
                stats.large_values += 1
                stats.bytes += len(key) + len(data)
                stored_values.add(key)
                continue
            if is_meta_key(key):
                continue
            topic = topic_of(key).decode(errors="replace")
            stats.topics[topic] = stats.topics.get(topic, 0) + 1
            stats.keys += 1
            stats.bytes += len(key) + len(data)
            try:
                record = decode_state(data)
            except StateFormatError:
                stats.unreadable += 1
                continue
            referenced.update(large_value_key(key, ref.digest) for ref in refs_of(record.image))
            stats.tombstones += record.deleted
            stats.parked_keys += bool(record.parked)
            stats.parked_records += len(record.parked)
            stats.waiting_handoffs += len(record.handoffs)
    except ValueError as exc:
        raise StoreUnreadable(f"{store.path}: unreadable changelog offset: {exc}") from None
    except StoreUnreadable:
        raise
    except Exception as exc:  # rocksdict: Exception("Corruption: ...") while reading
        raise StoreUnreadable(f"{store.path}: {_reason(exc)}") from None
    finally:
        db.close()
    missing, orphans = len(referenced - stored_values), len(stored_values - referenced)
    if missing or orphans:
        raise StoreUnreadable(
            f"{store.path}: the store is damaged: {missing} large values its rows refer to are "
            f"missing, and {orphans} large values no row refers to are there (the engine "
            "rebuilds it from the changelog when it next opens it)"
        )
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
