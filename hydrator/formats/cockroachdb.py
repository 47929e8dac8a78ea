"""CockroachDB changefeed messages: `format=json`, `envelope=wrapped`, `WITH updated`, and
optionally `diff`, `mvcc_timestamp`, `resolved`, `key_in_value`, `topic_in_value`.

A row message's Kafka key is the JSON array of its primary key values; its value is
`{"after": <row or null>, "updated": "<wall>.<logical>", ...}` (null `after`: a delete). A
changefeed delivers at least once: a version can come again right away, again after later ones,
or with everything since a checkpoint after a restart; a version never seen before is never
older than one already sent. So `updated`, read as the integer pair (wall time, logical), orders
a key's messages: one at or before the stored position is stale (rule 4).

The enriched message is the input with `before` added: the key's previous full row, `null` when
it had none (a first insert, a row deleted before). Deletes get it too. A message that carries
`before` already (the `diff` option) keeps CockroachDB's own. Everything else stays byte for
byte: `before` is written into the input's text, not re-serialized with it, and the stored row
keeps DECIMAL digits as written (hydrator.exact, `decimals`).

`{"resolved": "<timestamp>"}` messages (null key, every partition) pass through unchanged.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

import orjson

from hydrator import exact
from hydrator.events import (
    BadInput,
    ChangeEvent,
    InvalidKey,
    Op,
    Passthrough,
    Patch,
    Position,
    Read,
)
from hydrator.formats import values
from hydrator.formats.keys import CACHED_KEY_BYTES, canonical

# CockroachDB writes an HLC timestamp as "%d.%010d" (wall time in ns, logical counter); some
# releases mark a synthetic timestamp with a trailing "?", which does not change its order.
_HLC = re.compile(r"([0-9]{1,20})\.([0-9]{1,20})\??")
_NO_COLUMNS: frozenset[str] = frozenset()
_BEFORE = b'"before": '  # CockroachDB's own spacing: `{"after": {...}, "updated": "..."}`


class _Envelope:
    """What encode() needs: the value's bytes, and whether it carries `before` (`diff`)."""

    __slots__ = ("has_before", "raw")

    def __init__(self, raw: bytes, has_before: bool) -> None:
        self.raw = raw
        self.has_before = has_before


class CockroachCodec:
    name = "cockroachdb"
    key_in_record_key = True

    def key(self, read: Read) -> str | None:
        """The primary-key array, canonical; a null key (a `resolved` message) has no state."""
        raw_key = read.record.key
        return None if raw_key is None else primary_key(raw_key)

    def accepts(self, document: Any) -> bool:
        if not isinstance(document, dict):
            return False
        if "after" in document:
            return "op" not in document and "schema" not in document
        return document.keys() == {"resolved"} and isinstance(document["resolved"], str)

    def decode(self, read: Read) -> ChangeEvent | Passthrough:
        record = read.record
        if record.value is None:
            return Passthrough("kafka tombstone")
        document = _object(read)
        if "after" not in document:
            if "resolved" in document:
                timestamp(document["resolved"], "resolved")
                return Passthrough("resolved timestamp")
            raise BadInput(
                "not a CockroachDB changefeed message: no 'after' (envelope=wrapped) "
                "and no 'resolved'"
            )
        if record.key is None:
            raise BadInput("a row message without a Kafka key (its primary key array)")
        after = document["after"]
        if after is not None and type(after) is not dict:
            raise BadInput(f"'after' is a JSON {_kind(after)}, not an object or null")
        has_before = "before" in document
        if has_before and document["before"] is not None and type(document["before"]) is not dict:
            raise BadInput(f"'before' is a JSON {_kind(document['before'])}, not an object or null")
        if "updated" not in document:
            raise BadInput("no 'updated' timestamp: create the changefeed WITH updated")
        return ChangeEvent(  # positional, in field order: keywords cost twice as much
            # CockroachDB does not tell an insert from an update; UPDATE has the core fill
            # `before` from the stored row (whole_before), and DELETE leaves a tombstone.
            Op.UPDATE if after is not None else Op.DELETE,
            None,
            after,
            (),
            (),
            _NO_COLUMNS,
            timestamp(document["updated"], "updated"),
            None,
            None,
            None,
            _Envelope(record.value, has_before),
        )

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes:
        envelope: _Envelope = event.envelope
        if envelope.has_before:
            return envelope.raw
        if patch.whole_before is not None:
            before = exact.dumps(patch.whole_before)
        elif patch.old_image is None:
            before = b"null"
        else:  # a stored row the run was told not to add (--no-fill-before)
            return envelope.raw
        return values.with_members(envelope.raw, _BEFORE + before, b", ")


def timestamp(value: Any, field: str) -> Position:
    """An HLC timestamp `"<wall>.<logical>"` as the integer pair (wall, logical): never a
    float, which cannot hold 19 digits of nanoseconds and a logical counter."""
    if type(value) is not str:
        raise BadInput(f"'{field}' is a JSON {_kind(value)}, not a \"<wall>.<logical>\" string")
    match = _HLC.fullmatch(value)
    if match is None:
        raise BadInput(f"'{field}' is {value[:60]!r}, not \"<wall>.<logical>\"")
    wall, logical = int(match[1]), int(match[2])
    if wall > exact.MAX_PACKED_INT or logical > exact.MAX_PACKED_INT:
        raise BadInput(f"'{field}' {value!r} is out of range (64 bits)")
    return (wall, logical)


def primary_key(raw: bytes) -> str:
    if len(raw) > CACHED_KEY_BYTES:
        return _primary_key(raw)
    return _cached_primary_key(bytes(raw))


def _primary_key(raw: bytes) -> str:
    try:
        document = exact.loads(raw, decimals=True)
    except (orjson.JSONDecodeError, exact.ExactJSONError) as exc:
        raise InvalidKey(f"key is not JSON: {exc}") from None
    if type(document) is not list or not document:
        what = "an empty array" if document == [] else f"a JSON {_kind(document)}"
        raise InvalidKey(f"key is {what}, not the array of primary key values")
    return canonical(document)


# CDC traffic keeps coming back to the same rows: their key JSON is not parsed every time
_cached_primary_key = lru_cache(maxsize=4096)(_primary_key)


def _object(read: Read) -> dict[str, Any]:
    document = values.document(read, decimals=True)  # read once, also under --format auto
    if type(document) is not dict:
        raise BadInput(f"value is a JSON {_kind(document)}, not an object")
    return document


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    kinds: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return kinds.get(type(value), type(value).__name__)


__all__ = ["CockroachCodec", "primary_key", "timestamp"]
