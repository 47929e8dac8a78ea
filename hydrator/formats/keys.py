"""Canonical keys: one spelling of a primary key, whether it came as the record key or in a
`__debezium.oldkey/newkey` header, with or without a schema envelope. Integers are exact
(keys holding ones wider than 64 bits stay distinct), and a canonical key is always valid
UTF-8: engines build their store keys from it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

import orjson

from hydrator import exact
from hydrator.events import InvalidKey


def key_document(raw: bytes) -> Any:
    """The key's JSON, with a Kafka Connect `{"schema", "payload"}` envelope unwrapped."""
    try:
        document = exact.loads(raw)
    except orjson.JSONDecodeError as exc:
        document = _lenient(raw, exc)
    except exact.ExactJSONError as exc:
        raise InvalidKey(f"key is not JSON: {exc}") from None
    if isinstance(document, dict) and document.keys() == {"schema", "payload"}:
        document = document["payload"]
    if document is None:
        raise InvalidKey("key is JSON null")
    return document


def _lenient(raw: bytes, error: Exception) -> Any:
    """SimpleHeaderConverter writes control characters in key strings unescaped; the stdlib
    parser in non-strict mode reads them (orjson does not)."""
    try:
        return exact.lenient_loads(raw)
    except exact.ExactJSONError as exc:
        raise InvalidKey(f"key is not JSON: {exc}") from None
    except ValueError:  # UnicodeDecodeError is one
        raise InvalidKey(f"key is not JSON: {error}") from None


def canonical(document: Any) -> str:
    try:
        return exact.dumps(document, sort_keys=True).decode()
    except exact.ExactJSONError as exc:
        raise InvalidKey(f"key {exc}") from None


CACHED_KEY_BYTES: Final = 512


def canonical_key(raw: bytes) -> str:
    if len(raw) > CACHED_KEY_BYTES:
        return canonical(key_document(raw))
    return _canonical_short_key(bytes(raw))


# CDC traffic keeps coming back to the same rows. Room for the keys of a busy table: an LRU
# smaller than the keys a stream cycles through hits nothing (a few MB at 64k keys).
@lru_cache(maxsize=65_536)
def _canonical_short_key(raw: bytes) -> str:
    return canonical(key_document(raw))
