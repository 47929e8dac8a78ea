"""State bytes as a user pays for them: what the local stores take on disk, and what the broker
keeps of the changelog once it is compacted, in the codec it keeps the changelog's batches in.

* **on disk**: the files of the runner's state directory (RocksDB's tables and write-ahead log,
  its manifest and options; not its info logs `LOG*`), as the run left them.
* **on the broker**: the changelog topics read back (committed records only: aborted
  transactions are removed by the log cleaner too) and compacted as the broker's cleaner
  compacts them (each key's last record; a key whose last record is a tombstone, nothing), then
  laid out as the producer writes them: in batches of up to `BATCH_BYTES` of records, in their
  order, each compressed with the codec the broker keeps them in (the changelog topic's
  `compression.type`, else the producer's), plus Kafka's record and batch headers. The
  cleaner keeps the surviving records in the batches they were written in, so a real log holds
  these bytes or somewhat more (less full batches compress a little worse); the broker's own
  index files are left out. Computed, not read off the broker, so it is the same on any broker
  the bench runs against (Tansu keeps no files; a given broker's may be elsewhere) and needs
  no wait for the cleaner. A broker that does not honour a topic's `compression.type` keeps
  the engine's changelog as the producer wrote it, lz4-compressed: more bytes than counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

import lz4.frame
import zstandard

from hydrator.kafka.topic_reader import read_to_end

# librdkafka's batch.size default (the engine's and Quix's producers keep it).
BATCH_BYTES = 1_000_000
# Kafka's record batch header (v2), and about what a record's own header takes (attributes,
# timestamp and offset deltas, key and value lengths as varints, no headers).
BATCH_HEADER_BYTES = 61
RECORD_HEADER_BYTES = 10
_CODECS: dict[str, Callable[[bytes], bytes]] = {
    "none": lambda data: data,
    "lz4": lambda data: lz4.frame.compress(data),
    "zstd": lambda data: zstandard.ZstdCompressor(level=3).compress(data),
}


def disk_bytes(paths: Iterable[Path]) -> int:
    """Bytes of the store files under `paths` (RocksDB's info logs left out)."""
    return sum(
        f.stat().st_size
        for path in paths
        if path.exists()
        for f in path.rglob("*")
        if f.is_file() and not f.name.startswith("LOG")
    )


def compacted_changelog_bytes(
    bootstrap: str, topics: Iterable[str], codec: str, timeout_s: float = 600
) -> int:
    """What the broker keeps of `topics` after compaction (see the module doc)."""
    compress = _CODECS[codec]
    total = 0
    for topic in topics:
        for records in _compacted(bootstrap, topic, timeout_s).values():
            total += _batched_bytes(records.values(), compress)
    return total


def _batched_bytes(
    records: Iterable[tuple[bytes, bytes]], compress: Callable[[bytes], bytes]
) -> int:
    total, batch, size = 0, bytearray(), 0
    for key, value in records:
        entry = RECORD_HEADER_BYTES + len(key) + len(value)
        if batch and size + entry > BATCH_BYTES:
            total += BATCH_HEADER_BYTES + len(compress(bytes(batch)))
            batch, size = bytearray(), 0
        batch += key
        batch += value
        batch += bytes(RECORD_HEADER_BYTES)
        size += entry
    if batch:
        total += BATCH_HEADER_BYTES + len(compress(bytes(batch)))
    return total


def _compacted(
    bootstrap: str, topic: str, timeout_s: float
) -> dict[int, dict[bytes, tuple[bytes, bytes]]]:
    """Per partition, each key's last committed record (key, value) in offset order of those
    last records; keys whose last record is a tombstone left out."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "bench-state-bytes",
        "fetch.message.max.bytes": 16 * 1024 * 1024,
    }
    last: dict[int, dict[bytes, tuple[bytes, bytes] | None]] = {}
    deadline = time.monotonic() + timeout_s
    for msg in read_to_end(config, topic):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: not read to its end within {timeout_s:.0f} s")
        key, value = msg.key() or b"", msg.value()
        records = last.setdefault(msg.partition() or 0, {})
        records.pop(key, None)  # to the end: the order of the last records
        records[key] = None if value is None else (key, value)
    return {p: {k: r for k, r in records.items() if r is not None} for p, records in last.items()}
