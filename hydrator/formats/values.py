"""A record's value as JSON, read once per record however many readers ask for it.

Under `--format auto` three readers want the same value: the auto codec (to tell the format),
the codec it picks for `key` (YDB's identity is in the value) and that codec's `decode`. Codecs
read through here, so the text is parsed once: `peek` keeps the document of the last record it
read (one entry, the RawRecord object itself as its key), and `take`, which `decode` calls,
hands that document over and forgets it. A codec may then change the document it took to render
its patch: no later reader is handed a changed one.

A format whose numbers can be DECIMAL columns reads with `decimals` (hydrator.exact): a document
kept from a plain read serves it as it is when it holds no fractional number, else the value is
read again with decimals, as `exact.loads` itself would.

One entry, replaced whole: threads that share the codecs (the live view's feed) can only miss
it and read the value again, never get another record's document.
"""

from __future__ import annotations

from typing import Any

import orjson

from hydrator import exact
from hydrator.events import BadInput, RawRecord

_kept: tuple[RawRecord, Any] | None = None


def peek(record: RawRecord) -> Any:
    """The record's value as JSON (integers exact), kept for the next reader of this record."""
    global _kept
    kept = _kept
    if kept is not None and kept[0] is record:
        return kept[1]
    document = _read(record.value)
    _kept = (record, document)
    return document


def take(record: RawRecord, decimals: bool = False) -> Any:
    """The record's value as JSON for `decode`: the document `peek` kept for this record (then
    forgotten), else a fresh read. With `decimals`, non-integer numbers are Decimals."""
    global _kept
    kept = _kept
    if kept is not None and kept[0] is record:
        _kept = None
        if not decimals or not exact.has_float(kept[1]):
            return kept[1]
    return _read(record.value, decimals)


def take_object(record: RawRecord, what: str = "value", decimals: bool = False) -> dict[str, Any]:
    """`take`, for a format whose values are JSON objects."""
    return as_object(take(record, decimals), what)


def as_object(document: Any, what: str) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise BadInput(f"{what} is a JSON {type(document).__name__}, not an object")
    return document


def _read(raw: bytes | None, decimals: bool = False) -> Any:
    if raw is None:
        raise BadInput("value is null (a Kafka tombstone)")
    try:
        return exact.loads(raw, decimals)
    except (orjson.JSONDecodeError, exact.ExactJSONError) as exc:
        if len(raw) >= 5 and raw[0] == 0:  # JSON never starts with a zero byte
            schema_id = int.from_bytes(raw[1:5], "big")
            raise BadInput(
                f"value is not JSON: it looks like Confluent-framed Avro (schema id "
                f"{schema_id}); give --schema-registry-url to read it"
            ) from None
        raise BadInput(f"value is not JSON: {exc}") from None


__all__ = ["as_object", "peek", "take", "take_object"]


def with_members(raw: bytes, members: bytes, separator: bytes = b",") -> bytes:
    """The JSON object text `raw` with `members` (`"a":1,"b":2`, no braces) added last, the rest
    of its text byte for byte: a codec that adds fields keeps what the source wrote. The object
    has members already."""
    body = raw.rstrip(b" \t\n\r")
    return b"%s%s%s}" % (body[:-1], separator, members)
