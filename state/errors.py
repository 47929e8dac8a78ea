"""What the state layer raises when the storage under it fails.

A storage error is an infrastructure failure, never a record's fault: the core lets it through
(it does not become a dead letter), the engine aborts the open batch, moves the store aside and
rebuilds it from the changelog.
"""

from __future__ import annotations

# The kind (exit 75 should one reach the top); defined with the other kinds of error.
from hydrator.errors import StorageError

__all__ = ["StorageError", "StoreCorrupted", "StoreInconsistent"]


class StoreCorrupted(StorageError):
    """RocksDB found the store's files damaged (a bad checksum, a truncated, garbled or missing
    file, a store path that is no directory)."""


class StoreInconsistent(StoreCorrupted):
    """The store disagrees with itself (a row without its large value, a large value without its
    row): its files read fine, but something removed records from it. A local store is a cache
    of the changelog, so this is damage to rebuild from, never data to forget."""
