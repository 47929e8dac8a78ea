"""A durable store on RocksDB (rocksdict): one per embedded-engine task.

Besides state records it keeps the changelog offset it reflects, written in the same atomic batch
as the records, so the store and its restore point can never disagree — not even after a crash
in the middle of a write.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

from hydrator.errors import StorageError
from state.codec import decode_state, encode_state
from state.record import StateRecord

# State keys are `topic\x00key` with a non-empty topic, so they never start with NUL.
META_PREFIX = b"\x00"
CHANGELOG_OFFSET_KEY = META_PREFIX + b"changelog-offset"


class StoreCorrupted(StorageError, RuntimeError):
    """RocksDB found the store's files damaged (a bad checksum, a truncated or garbled file)."""


class RocksDBStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        try:
            self._db = Rdict(str(self.path), options)
        except Exception as exc:  # rocksdict raises plain Exception("Corruption: ...")
            if _damaged(exc):
                raise StoreCorrupted(str(exc)) from exc
            raise

    # -- the StateStore interface -----------------------------------------------------------

    def get(self, key: bytes) -> StateRecord | None:
        data = self._db.get(key)
        return decode_state(data) if data is not None else None

    def put(self, key: bytes, record: StateRecord) -> None:
        self._db.put(key, encode_state(record))

    def delete(self, key: bytes) -> None:
        self._db.delete(key)

    def items(self) -> Iterator[tuple[bytes, StateRecord]]:
        for key, data in self.raw_items():
            yield key, decode_state(data)

    def close(self) -> None:
        self._db.close()

    # -- what the changelog needs -----------------------------------------------------------

    def get_raw(self, key: bytes) -> bytes | None:
        """A key's encoded bytes as stored (a state record, or a meta record such as the
        embedded engine's clock reading, which the changelog carries like any record)."""
        return self._db.get(key)

    def raw_items(self) -> Iterator[tuple[bytes, bytes]]:
        for key, data in self._db.items():
            if not key.startswith(META_PREFIX):
                yield key, data

    def keys_with_prefix(self, prefix: bytes) -> Iterator[bytes]:
        for key in self._db.keys(from_key=prefix):
            if not key.startswith(prefix):
                return
            yield key

    def apply(self, changes: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """Write encoded records (None deletes) and the changelog offset they bring the store to,
        atomically."""
        batch = WriteBatch(raw_mode=True)
        for key, data in changes.items():
            if data is None:
                batch.delete(key)
            else:
                batch.put(key, data)
        batch.put(CHANGELOG_OFFSET_KEY, str(changelog_offset).encode())
        self._db.write(batch)

    def estimated_bytes(self) -> int:
        """RocksDB's estimate of what the store holds: the live data of its files plus its
        memtables (these count the memory they took, about 1 MB at least once written to)."""
        db = self._db
        live = db.property_int_value("rocksdb.estimate-live-data-size") or 0
        return live + (db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0)

    @property
    def changelog_offset(self) -> int | None:
        """The changelog offset to resume restoring from; None for a store never checkpointed."""
        data = self._db.get(CHANGELOG_OFFSET_KEY)
        return int(data) if data is not None else None

    def flush(self) -> None:
        """Make everything written so far survive a machine crash (not only a process crash)."""
        self._db.flush_wal(True)

    def verify(self) -> None:
        """Read every record once: RocksDB checks each block's checksum as it reads it, so a
        damaged file shows here rather than in the middle of processing."""
        try:
            for _ in self._db.items():
                pass
            self.changelog_offset  # noqa: B018 - a garbled checkpoint is damage too
        except ValueError as exc:
            raise StoreCorrupted(f"unreadable changelog offset: {exc}") from exc
        except Exception as exc:
            if _damaged(exc):
                raise StoreCorrupted(str(exc)) from exc
            raise

    @staticmethod
    def move_aside(path: Path) -> Path:
        """Rename a damaged store's directory (kept for inspection); returns the new path."""
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
        n = 1
        while aside.exists():
            n += 1
            aside = aside.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{n}")
        path.rename(aside)
        return aside

    @staticmethod
    def destroy(path: Path) -> None:
        """Remove a store's files; used when the local copy cannot be trusted."""
        shutil.rmtree(path, ignore_errors=True)


def _damaged(exc: Exception) -> bool:
    # RocksDB's status codes for damaged files; a lock held elsewhere or a permission problem
    # ("IO error: ...") is not damage, and moving the store aside would not help.
    text = str(exc)
    return text.startswith(("Corruption:", "Invalid argument:")) or "Corruption" in text
