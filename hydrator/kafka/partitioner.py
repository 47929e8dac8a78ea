"""Where sources put a keyed record: Kafka's default key partitioner, so the engine knows where a
key lives without asking, and CockroachDB's changefeed placement.

The Java client (and librdkafka's `murmur2_random`) place a keyed record in
`(murmur2(key) & 0x7fffffff) % partitions`. Debezium produces through the Java client, so this
tells which input partition, and therefore which task, owns a primary key.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash exactly as org.apache.kafka.common.utils.Utils.murmur2."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a_32(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def changefeed_partition(key: bytes, partitions: int) -> int:
    """Where CockroachDB's Kafka sink puts a keyed message: its `changefeedPartitioner` wraps
    Sarama's hash partitioner (the franz-go sink keeps the same placement): the 32-bit FNV-1a
    hash of the key bytes as a signed 32-bit integer, its remainder by the partition count (Go's
    `%` keeps the sign), then the absolute value. Messages without a key (`resolved`) go to
    every partition."""
    unsigned = fnv1a_32(key)
    signed = unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned
    return abs(signed) % partitions
