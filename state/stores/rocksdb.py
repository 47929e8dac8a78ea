"""A durable store on RocksDB (rocksdict): one per embedded-engine task.

Besides state records it keeps the changelog offset it reflects, written in the same atomic batch
as the records, so the store and its restore point can never disagree — not even after a crash
in the middle of a write.

Values are compressed here, per block, by RocksDB's own threads (zstd, on every level: the rows
and their large values are text, and a flush or compaction compresses each block once, off the
event's path; state/large.py no longer compresses values one by one). Closing a store writes
its memtables out first, so what it leaves on disk is compressed tables rather than the
uncompressed write-ahead log, and the next open has no log to replay.

Every failure of RocksDB under a read or a write is raised as a `StorageError` naming the store
(a damaged file as `StoreCorrupted`), never as rocksdict's plain Exception: a caller can tell a
failing store from anything else, and the engine rebuilds that store from the changelog. Reads
verify each block's checksum; an iteration checks the iterator's status at its end, because
rocksdict's iterator just stops at a damaged block.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from rocksdict import DBCompressionType, Options, Rdict, ReadOptions, WriteBatch

from state.codec import decode_state, encode_state
from state.errors import StorageError, StoreCorrupted
from state.layout import CHANGELOG_OFFSET_KEY, FIRST_STATE_KEY, META_PREFIX, decode_offset
from state.layout import encode_offset as _encode_offset
from state.record import StateRecord

__all__ = [
    "CHANGELOG_OFFSET_KEY",
    "META_PREFIX",
    "VERIFY_BUDGET_S",
    "RocksDBStore",
    "StorageError",
    "StoreCorrupted",
]

log = logging.getLogger(__name__)

# How long the open-time check may read: past it, the rest of the store is checked as it is
# read (every read verifies its blocks' checksums, and a failure is a StorageError).
VERIFY_BUDGET_S = 120.0
# What RocksDB writes in its OPTIONS file for the compression set below (tests read it back).
COMPRESSION = "kZSTD"
BOTTOMMOST_COMPRESSION = "kZSTD"


class RocksDBStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.path.is_dir():
            raise StoreCorrupted(f"{self.path} is not a directory", self.path)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_paranoid_checks(True)
        options.set_compression_type(DBCompressionType.zstd())
        options.set_bottommost_compression_type(DBCompressionType.zstd())
        try:
            self._db = Rdict(str(self.path), options)
        except Exception as exc:  # rocksdict raises plain Exception("Corruption: ...")
            if _damaged(exc):
                raise StoreCorrupted(str(exc), self.path) from exc
            raise

    # -- decoded records (the state tools and tests) ------------------------------------------

    def get(self, key: bytes) -> StateRecord | None:
        data = self.get_raw(key)
        return decode_state(data) if data is not None else None

    def put(self, key: bytes, record: StateRecord) -> None:
        self.apply_unversioned({key: encode_state(record)})

    def delete(self, key: bytes) -> None:
        self.apply_unversioned({key: None})

    def items(self) -> Iterator[tuple[bytes, StateRecord]]:
        for key, data in self.raw_items():
            yield key, decode_state(data)

    def close(self) -> None:
        try:
            self._db.flush(True)
        except Exception as exc:  # the write-ahead log still holds it: nothing is lost
            log.warning("%s: could not write the memtables out before closing: %s", self.path, exc)
        self._db.close()

    # -- what the changelog needs -----------------------------------------------------------

    def get_raw(self, key: bytes) -> bytes | None:
        """A key's encoded bytes as stored (a state record, a large value, or a meta record such
        as the embedded engine's clock reading, which the changelog carries like any record)."""
        try:
            return self._db.get(key)
        except Exception as exc:
            raise self._failure("read", exc) from exc

    def raw_items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every state record (meta records and large values left out)."""
        yield from self._scan(FIRST_STATE_KEY, None, values=True)  # type: ignore[misc]

    def keys_with_prefix(self, prefix: bytes) -> Iterator[bytes]:
        for key, _ in self._scan(prefix, prefix, values=False):
            yield key

    def _scan(
        self, start: bytes, prefix: bytes | None, values: bool
    ) -> Iterator[tuple[bytes, bytes | None]]:
        """Keys from `start` on (while they start with `prefix`), with their values if asked;
        raises StorageError when the iteration stopped at damage rather than at the end."""
        it = self._db.iter(_checked_reads())
        try:
            it.seek(start)
            while it.valid():
                key = it.key()
                if prefix is not None and not key.startswith(prefix):
                    return
                yield key, (it.value() if values else None)
                it.next()
            it.status()
        except Exception as exc:
            raise self._failure("read", exc) from exc
        finally:
            del it  # an iterator left alive keeps the store open (and locked) past close()

    def apply(self, changes: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """Write encoded records (None deletes) and the changelog offset they bring the store to,
        atomically."""
        self._write(changes, changelog_offset)

    def apply_unversioned(self, changes: Mapping[bytes, bytes | None]) -> None:
        """Write records without moving the changelog offset (tests and tools)."""
        self._write(changes, None)

    def _write(self, changes: Mapping[bytes, bytes | None], changelog_offset: int | None) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, data in changes.items():
            if data is None:
                batch.delete(key)
            else:
                batch.put(key, data)
        if changelog_offset is not None:
            batch.put(CHANGELOG_OFFSET_KEY, _encode_offset(changelog_offset))
        try:
            self._db.write(batch)
        except Exception as exc:
            raise self._failure("write", exc) from exc

    def estimated_bytes(self) -> int:
        """RocksDB's estimate of what the store holds: the live data of its files plus its
        memtables (these count the memory they took, about 1 MB at least once written to)."""
        db = self._db
        live = db.property_int_value("rocksdb.estimate-live-data-size") or 0
        return live + (db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0)

    @property
    def changelog_offset(self) -> int | None:
        """The changelog offset to resume restoring from; None for a store never checkpointed."""
        data = self.get_raw(CHANGELOG_OFFSET_KEY)
        try:
            return decode_offset(data)
        except ValueError as exc:
            raise StoreCorrupted(f"unreadable changelog offset: {exc}", self.path) from exc

    def flush(self) -> None:
        """Make everything written so far survive a machine crash (not only a process crash)."""
        try:
            self._db.flush_wal(True)
        except Exception as exc:
            raise self._failure("write", exc) from exc

    def verify(self, budget_s: float = VERIFY_BUDGET_S) -> None:
        """Read every block of the store once, checksums verified, so a damaged file shows here
        rather than in the middle of processing. rocksdict's iterator stops at a damaged block
        as if the store ended there; its status says why. A store too large to read within
        `budget_s` is checked up to there (the rest is checked as it is read)."""
        began = time.monotonic()
        self.changelog_offset  # noqa: B018 - a garbled checkpoint is damage too
        it = self._db.iter(_checked_reads())
        try:
            it.seek_to_first()
            n = 0
            while it.valid():
                it.key()
                it.value()
                it.next()
                n += 1
                if n % 4096 == 0 and time.monotonic() - began > budget_s:
                    log.info(
                        "%s: checked %d records in %.0f s; the rest is checked as it is read",
                        self.path,
                        n,
                        budget_s,
                    )
                    return
            it.status()
        except Exception as exc:
            raise self._failure("read", exc) from exc
        finally:
            del it  # an iterator left alive keeps the store open (and locked) past close()

    def _failure(self, what: str, exc: Exception) -> StorageError:
        text = f"{self.path}: {what} failed: {exc}"
        return StoreCorrupted(text, self.path) if _damaged(exc) else StorageError(text, self.path)

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


def _checked_reads() -> ReadOptions:
    options = ReadOptions()
    options.set_verify_checksums(True)
    # a scan of the whole store must not push the working set out of the block cache
    options.fill_cache(False)  # type: ignore[call-arg]  # rocksdict's stub lacks the flag
    return options


def _damaged(exc: Exception) -> bool:
    """Whether RocksDB's error says the store's files are damaged: a bad checksum or a garbled
    file ("Corruption", "Invalid argument"), or a file of the store gone missing ("IO error: No
    such file or directory", a MANIFEST or a table file). A lock held elsewhere or a permission
    problem is no damage: moving the store aside would not help."""
    text = str(exc)
    if "Corruption" in text or text.startswith("Invalid argument:"):
        return True
    return text.startswith("IO error:") and "No such file or directory" in text
