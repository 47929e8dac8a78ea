"""A record's value as JSON, parsed once per record however many readers ask for it.

Codecs read a value through here with the record's Read (hydrator.events), which keeps the
document the first reader parsed: under `--format auto` detection, the chosen codec's `key`
(YDB's identity is in the value) and its `decode` share one parse. The document lives in the
Read, so it is the record's own: nothing is kept between records, and threads that share the
codecs (the live view's feed) share no document. A codec may change the document it decoded to
render its patch: nothing reads a Read again after `decode` and `encode`.

A format whose numbers can be DECIMAL columns reads with `decimals` (hydrator.exact): a document
read without them serves as it is when it holds no fractional number, else the value is read
again with decimals, as `exact.loads` itself would.
"""

from __future__ import annotations

from typing import Any

import orjson

from hydrator import exact
from hydrator.events import BadInput, Read


def document(read: Read, decimals: bool = False) -> Any:
    """The record's value as JSON (integers exact; with `decimals`, non-integer numbers are
    Decimals), parsed by the first reader of `read` and kept in it for the next."""
    if read.parsed and (
        decimals == read.decimals or (decimals and not exact.has_float(read.document))
    ):
        return read.document
    # unread; or wanted with decimals and holding fractions; or (a reader after `decode`) wanted
    # without decimals after a read with them
    found = _read(read.record.value, decimals)
    read.document, read.parsed, read.decimals = found, True, decimals
    return found


def document_object(read: Read, what: str = "value", decimals: bool = False) -> dict[str, Any]:
    """`document`, for a format whose values are JSON objects."""
    return as_object(document(read, decimals), what)


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


__all__ = ["as_object", "document", "document_object", "with_members"]


def with_members(raw: bytes, members: bytes, separator: bytes = b",") -> bytes:
    """The JSON object text `raw` with `members` (`"a":1,"b":2`, no braces) added last, the rest
    of its text byte for byte: a codec that adds fields keeps what the source wrote. The object
    has members already."""
    body = raw.rstrip(b" \t\n\r")
    return b"%s%s%s}" % (body[:-1], separator, members)
