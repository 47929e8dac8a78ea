"""Canonical keys: one spelling of a primary key, whether it came as the record key or in a
`__debezium.oldkey/newkey` header, with or without a schema envelope (DESIGN §3)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import orjson


class InvalidKey(ValueError):
    """The key bytes are not a decodable key."""


def key_document(raw: bytes) -> Any:
    """The key's JSON, with a Kafka Connect `{"schema", "payload"}` envelope unwrapped."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        document = _lenient(raw, exc)
    if isinstance(document, dict) and document.keys() == {"schema", "payload"}:
        document = document["payload"]
    if document is None:
        raise InvalidKey("key is JSON null")
    return document


def _lenient(raw: bytes, error: Exception) -> Any:
    """SimpleHeaderConverter writes control characters in key strings unescaped; the stdlib
    parser in non-strict mode reads them (orjson does not)."""
    try:
        return json.loads(raw, strict=False)
    except (ValueError, UnicodeDecodeError):
        raise InvalidKey(f"key is not JSON: {error}") from None


def canonical(document: Any) -> str:
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode()


CACHED_KEY_BYTES = 512


def canonical_key(raw: bytes) -> str:
    if len(raw) > CACHED_KEY_BYTES:
        return canonical(key_document(raw))
    return _canonical_short_key(bytes(raw))


@lru_cache(maxsize=4096)  # an engine routes a record, then the core reads its key again
def _canonical_short_key(raw: bytes) -> str:
    return canonical(key_document(raw))
