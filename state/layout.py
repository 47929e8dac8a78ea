"""Every byte layout of a task's local store (and of its changelog partition, which holds the
same records under the same keys), in one place: the engine and the state tools read them here.

    topic \\x00 canonical key              a row's state record (state/codec.py)
    \\x00 changelog-offset                  the changelog offset the store reflects (store only)
    \\x00 processing-clock                  the task's processing-clock reading
    \\x00\\x01 owner state key + digest      a large value of the row stored under `owner`

State keys start with a non-empty topic, so they never start with NUL: every key that does is
a meta record or a large value, and sorts before every state.
"""

from __future__ import annotations

from hydrator.errors import HydratorError

META_PREFIX = b"\x00"
CHANGELOG_OFFSET_KEY = META_PREFIX + b"changelog-offset"
CLOCK_KEY = META_PREFIX + b"processing-clock"
LARGE_VALUE_PREFIX = META_PREFIX + b"\x01"
DIGEST_BYTES = 16
_SEPARATOR = b"\x00"
# Past every meta record and large value (they start with NUL, then a byte below 0xff).
FIRST_STATE_KEY = META_PREFIX + b"\xff"


class KeyLayoutError(HydratorError, ValueError):
    """The bytes are not a key of the layout they were read as."""


def state_key(topic: str, key: str) -> bytes:
    """The store key of a row's state: state is per input topic and canonical key."""
    return f"{topic}\x00{key}".encode()


def split_state_key(key: bytes) -> tuple[str, str]:
    """(input topic, canonical key) of a state key (bytes that are not UTF-8 replaced)."""
    if is_meta_key(key) or _SEPARATOR not in key:
        raise KeyLayoutError(f"{key[:80]!r} is not a state key")
    topic, _, canonical = key.partition(_SEPARATOR)
    return topic.decode(errors="replace"), canonical.decode(errors="replace")


def topic_of(key: bytes) -> bytes:
    """The input topic's bytes of a state key."""
    return key.split(_SEPARATOR, 1)[0]


def topic_end(topic: bytes) -> bytes:
    """The first key past every state of `topic` (keys of topic T sort in [T\\x00, T\\x01))."""
    return topic + b"\x01"


def is_meta_key(key: bytes) -> bool:
    """A meta record or a large value: anything but a row's state."""
    return key.startswith(META_PREFIX)


def large_value_key(owner: bytes, digest: bytes) -> bytes:
    """The key of a large value of the row stored under `owner`. Values are kept per owner, so
    a value is collected by looking at its own row's images only."""
    return LARGE_VALUE_PREFIX + owner + digest


def is_large_value_key(key: bytes) -> bool:
    return key.startswith(LARGE_VALUE_PREFIX)


def split_large_value_key(key: bytes) -> tuple[bytes, bytes]:
    """(owner state key, digest) of a large value's key."""
    if not is_large_value_key(key) or len(key) <= len(LARGE_VALUE_PREFIX) + DIGEST_BYTES:
        raise KeyLayoutError(f"{key[:80]!r} is not a large value's key")
    return key[len(LARGE_VALUE_PREFIX) : -DIGEST_BYTES], key[-DIGEST_BYTES:]


def encode_offset(offset: int) -> bytes:
    return str(offset).encode()


def decode_offset(data: bytes | None) -> int | None:
    """The store's changelog offset; raises ValueError for bytes that are no offset."""
    return int(data) if data is not None else None


def encode_reading(ms: int) -> bytes:
    return str(ms).encode()


def decode_reading(data: bytes | None) -> int | None:
    """A saved clock reading; None when there is none or it cannot be read (then the clock starts
    from the wall clock, as a store from before the clock existed does)."""
    if data is None:
        return None
    try:
        return int(data)
    except ValueError:
        return None
