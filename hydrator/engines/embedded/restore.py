"""Bring a task's local store up to date with its changelog partition before it processes.

The store remembers the changelog offset it reflects; only the records after it are replayed.
A store that has no such offset, or one the changelog does not have (the topic was recreated),
is wiped and rebuilt from the beginning. Records of a transaction that never committed are
skipped and their keys handed back for repair (see changelog.py).

Damage is not fatal: a store whose files RocksDB reports as corrupt (a bad checksum in any block,
read once at open; a missing MANIFEST or table file; a store path that is no directory), or that
disagrees with itself (task.py), is moved aside (kept for inspection, named in a warning) and
rebuilt from the changelog, and a changelog record that
cannot be decoded is skipped, its key forgotten (no state is better than a wrong one), and
reported with its offset and reason. A large value's record (state/large.py) is checked against
its digest; a bad one is skipped the same way, and the task that opens the store next makes its
row forget that column (state/embedded/changelog.py: only in a store rebuilt from the changelog,
which lacks the value too). A stop request ends a restore between two fetches.

With --workers, the store of a task may still be open in the worker that ran the task before a
rebalance (it lets go at its own next assignment, or at its exit): opening waits for it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

from hydrator.engines.embedded import changelog
from hydrator.engines.embedded.watchdog import blocking
from hydrator.errors import Stopped
from hydrator.kafka import consumed
from hydrator.kafka.offsets import TIMEOUT_S as PROBE_TIMEOUT_S
from hydrator.kafka.offsets import OffsetProbe
from state.codec import decode_state
from state.errors import StorageError, StoreCorrupted
from state.large import is_store_key, split_store_key, unpack_value
from state.layout import CHANGELOG_OFFSET_KEY, META_PREFIX
from state.stores.rocksdb import RocksDBStore

log = logging.getLogger(__name__)

BATCH = 10_000
STALL_WARNING_S = 10.0
# Undecodable changelog records reported one by one per restore; the rest only counted.
REPORTED_BAD_RECORDS = 10
# How long to wait for another process to let go of a store (see the module's note).
STORE_LOCK_WAIT_S = 60.0
_STORE_LOCK_RETRY_S = 0.1


class RestoreStopped(Stopped):
    """A stop was requested while a store was being restored."""


class Restored(NamedTuple):
    """A task's store, restored to the changelog's end."""

    store: RocksDBStore
    repairs: list[bytes]  # keys a dead transaction wrote, which the task must write again
    rebuilt: bool  # restored from the changelog's start: it holds what the changelog holds


def set_aside(path: Path, where: str, problem: StorageError, counts: Counter[str]) -> Path | None:
    """Move the damaged store at `path` aside (kept for inspection, named in a warning), so the
    next open rebuilds it from the changelog; None when there is nothing at `path`."""
    if not path.exists() and not path.is_symlink():
        return None
    aside = RocksDBStore.move_aside(path)
    counts["damaged_stores"] += 1
    log.warning(
        "%s: the local store is damaged (%s); moved it to %s and rebuilding it from the changelog",
        where,
        problem,
        aside,
    )
    return aside


def rebuild_reason(start: int | None, low: int, high: int) -> str:
    """Why a local store that does not fit its changelog partition is rebuilt, and that this
    loses nothing: the store is a cache of the changelog. `start`: the changelog offset the store
    had read up to (None: it holds data without one); `[low, high]`: the partition's offsets."""
    where = f"local store at offset {start} is outside the changelog [{low}, {high}]"
    if start is None:
        where = f"local store holds data but no changelog offset (the changelog is [{low}, {high}])"
        what = "it was not written by this engine's restore or commit"
    elif start > high:
        what = (
            "the changelog is not the one this store was written from: the topic was deleted "
            "and created again (a restarted `hydrator dev broker` starts with no topics), or "
            "this state directory was used against another broker or cluster"
        )
    else:
        what = (
            "records the store had not read yet were compacted out of the changelog while the "
            "store was not in use"
        )
    return (
        f"{where}: {what}. The local store only caches the changelog, so nothing is lost: "
        "rebuilding it from the changelog"
    )


class Restorer:
    def __init__(
        self,
        consumer_config: dict[str, Any],
        probe: OffsetProbe,
        topic: str,
        should_stop: Callable[[], bool] = lambda: False,
        counts: Counter[str] | None = None,
    ) -> None:
        # read_committed: an aborted transaction's state must not come back.
        self._consumer = Consumer(
            {**consumer_config, "isolation.level": "read_committed", "enable.auto.commit": False}
        )
        self._probe = probe
        self._topic = topic
        self._should_stop = should_stop
        self._counts = counts if counts is not None else Counter()

    def open(self, path: Path, partition: int, committed: changelog.CommittedOffsets) -> Restored:
        """The store of changelog partition `partition`, restored to the changelog's end, and
        the keys a dead transaction wrote, which the task must write again. `committed`: the
        group's committed offsets, by which a record's transaction is judged."""
        store = self._open_store(path, partition)
        # Up to three probe timeouts in a row: the low watermark, the reported end, the fetch.
        with blocking(f"{self._topic}-{partition} watermarks", 3 * PROBE_TIMEOUT_S):
            low, high = self._probe.watermarks(self._topic, partition)
        start = store.changelog_offset
        rebuilt = start is None or not low <= start <= high
        if start is None or rebuilt:  # `start is None` again for the type checker
            if start is not None or next(store.raw_items(), None) is not None:
                log.warning("%s-%d: %s", self._topic, partition, rebuild_reason(start, low, high))
            store.close()
            RocksDBStore.destroy(path)
            store = RocksDBStore(path)
            start = low
        repairs: dict[bytes, None] = {}
        if start < high:
            began = time.monotonic()
            count = self._replay(store, partition, start, high, committed, repairs)
            log.info(
                "%s-%d: restored %d records (offsets %d..%d) in %.1f s%s",
                self._topic,
                partition,
                count,
                start,
                high,
                time.monotonic() - began,
                f"; {len(repairs)} keys of a transaction that never committed" if repairs else "",
            )
        return Restored(store, list(repairs), rebuilt)

    def set_aside(self, path: Path, partition: int, problem: StorageError) -> Path | None:
        return set_aside(path, f"{self._topic}-{partition}", problem, self._counts)

    def _open_store(self, path: Path, partition: int) -> RocksDBStore:
        """The local store at `path`; a damaged one is moved aside and an empty one opened (the
        restore then rebuilds it from the changelog)."""
        store: RocksDBStore | None = None
        try:
            store = self._open_when_free(path, partition)
            store.verify()
            return store
        except StoreCorrupted as exc:
            if store is not None:
                store.close()
            self.set_aside(path, partition, exc)
            return RocksDBStore(path)

    def _open_when_free(self, path: Path, partition: int) -> RocksDBStore:
        """The store at `path`, once no other process holds RocksDB's lock on it."""
        began = time.monotonic()
        store = _open_unless_held(path)
        if store is not None:
            return store
        log.info("%s-%d: another worker still has the store open; waiting", self._topic, partition)
        while store is None:
            if self._should_stop():
                raise RestoreStopped(f"{self._topic}-{partition}: waiting for the store")
            if time.monotonic() - began >= STORE_LOCK_WAIT_S:
                raise TimeoutError(
                    f"{path} is still held by another process after {STORE_LOCK_WAIT_S:.0f} s"
                )
            time.sleep(_STORE_LOCK_RETRY_S)
            store = _open_unless_held(path)
        log.info(
            "%s-%d: the store was let go after %.1f s",
            self._topic,
            partition,
            time.monotonic() - began,
        )
        return store

    def _replay(
        self,
        store: RocksDBStore,
        partition: int,
        start: int,
        end: int,
        committed: changelog.CommittedOffsets,
        repairs: dict[bytes, None],
    ) -> int:
        tp = TopicPartition(self._topic, partition, start)
        self._consumer.assign([tp])
        changes: dict[bytes, bytes | None] = {}
        position = start
        # A dead transaction's records stay in the changelog: until the repairs are committed,
        # every restore must look at them again.
        first_dead: int | None = None
        count = 0
        last_progress = time.monotonic()
        try:
            while position < end:
                if self._should_stop():
                    raise RestoreStopped(f"{self._topic}-{partition} at offset {position}")
                messages = self._consumer.consume(BATCH, 0.05)
                for msg in messages:
                    if msg.error():
                        raise KafkaException(msg.error())
                    key = msg.key()
                    problem = _unreadable(key, msg.value(), consumed.headers(msg))
                    if problem is not None:
                        self._skip(partition, consumed.offset(msg), problem)
                        if key is not None and not key.startswith(META_PREFIX):
                            repairs.pop(key, None)
                            changes[key] = None  # forget the key: no state beats a wrong one
                        continue
                    assert key is not None  # a record without a key is a problem (`_unreadable`)
                    if changelog.never_committed(consumed.headers(msg), committed, partition):
                        repairs[key] = None
                        if first_dead is None:
                            first_dead = msg.offset()
                        continue
                    repairs.pop(key, None)
                    changes[key] = msg.value()
                    count += 1
                reached = self._position(tp, position)
                if reached > position:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > STALL_WARNING_S:
                    # Only an open transaction holds a read_committed reader back: a dead
                    # instance's, until the broker times it out or the instance restarts with
                    # its state directory (Tansu never times it out).
                    log.warning(
                        "%s-%d: restore waits at offset %d for an open transaction to end",
                        self._topic,
                        partition,
                        position,
                    )
                    last_progress = time.monotonic()
                position = reached
                if changes and (len(changes) >= BATCH or position >= end):
                    store.apply(changes, position if first_dead is None else first_dead)
                    changes = {}
            store.apply(changes, position if first_dead is None else first_dead)
        finally:
            self._consumer.unassign()
        return count

    def _skip(self, partition: int, offset: int, reason: str) -> None:
        self._counts["changelog_records_skipped"] += 1
        skipped = self._counts["changelog_records_skipped"]
        if skipped <= REPORTED_BAD_RECORDS:
            log.warning(
                "%s-%d: skipped the changelog record at offset %d: %s%s",
                self._topic,
                partition,
                offset,
                reason,
                "; further ones are only counted" if skipped == REPORTED_BAD_RECORDS else "",
            )

    def _position(self, tp: TopicPartition, fallback: int) -> int:
        # The consumer's position also steps over transaction markers, which no message shows.
        (current,) = self._consumer.position([TopicPartition(tp.topic, tp.partition)])
        return current.offset if current.offset >= 0 else fallback

    def close(self) -> None:
        self._consumer.close()


def _open_unless_held(path: Path) -> RocksDBStore | None:
    """The store at `path`; None when RocksDB cannot take its LOCK file because another process
    has the store open."""
    try:
        return RocksDBStore(path)
    except StoreCorrupted:
        raise
    except Exception as exc:  # rocksdict raises plain Exception("IO error: ...")
        text = str(exc)
        if "lock" in text.lower() and "Resource temporarily unavailable" in text:
            return None
        raise


def _unreadable(key: bytes | None, value: bytes | None, headers: changelog.Headers) -> str | None:
    """Why a changelog record cannot be restored; None when it can."""
    if key is None:
        return "no key"
    if key == CHANGELOG_OFFSET_KEY:
        return "it claims the store's own checkpoint key"
    try:
        changelog.never_committed(headers, changelog.CommittedOffsets(), 0)
    except changelog.UnreadableHeader as exc:
        return str(exc)
    if value is None:
        return None  # a deletion
    if is_store_key(key):
        try:
            unpack_value(value, split_store_key(key)[1])
        except Exception as exc:
            return f"unreadable large value ({type(exc).__name__}: {exc})"
        return None
    if key.startswith(META_PREFIX):
        return None  # a meta record whose reader copes with bad bytes itself
    try:
        decode_state(value)
    except Exception as exc:
        return f"undecodable state ({type(exc).__name__}: {exc})"
    return None
