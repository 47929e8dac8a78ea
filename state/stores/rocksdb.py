"""A durable store on RocksDB (rocksdict): one per embedded-engine task.

Besides state records it keeps the changelog offset it reflects, written in the same atomic batch
as the records, so the store and its restore point can never disagree — not even after a crash
in the middle of a write.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

from state.codec import decode_state, encode_state
from state.record import StateRecord

# State keys are `topic\x00key` with a non-empty topic, so they never start with NUL.
_META_PREFIX = b"\x00"
_CHANGELOG_OFFSET = _META_PREFIX + b"changelog-offset"


class RocksDBStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._db = Rdict(str(self.path), options)

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
            if not key.startswith(_META_PREFIX):
                yield key, data

    def apply(self, changes: Mapping[bytes, bytes | None], changelog_offset: int) -> None:
        """Write encoded records (None deletes) and the changelog offset they bring the store to,
        atomically."""
        batch = WriteBatch(raw_mode=True)
        for key, data in changes.items():
            if data is None:
                batch.delete(key)
            else:
                batch.put(key, data)
        batch.put(_CHANGELOG_OFFSET, str(changelog_offset).encode())
        self._db.write(batch)

    @property
    def changelog_offset(self) -> int | None:
        """The changelog offset to resume restoring from; None for a store never checkpointed."""
        data = self._db.get(_CHANGELOG_OFFSET)
        return int(data) if data is not None else None

    def flush(self) -> None:
        """Make everything written so far survive a machine crash (not only a process crash)."""
        self._db.flush_wal(True)

    @staticmethod
    def destroy(path: Path) -> None:
        """Remove a store's files; used when the local copy cannot be trusted."""
        shutil.rmtree(path, ignore_errors=True)
