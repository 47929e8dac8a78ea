"""How Debezium's "unavailable value" placeholder P looks in JSON, per column type
(docs/formats.md).

With a field schema the type says exactly which spelling to expect; without one, any of the
spellings counts.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

JSON_NAME = "io.debezium.data.Json"
UUID_NAME = "io.debezium.data.Uuid"
INTEGER_TYPES = frozenset({"int8", "int16", "int32", "int64"})


def name_based_uuid(data: bytes) -> str:
    """Java's UUID.nameUUIDFromBytes (MD5, version 3), which Debezium uses for uuid[]."""
    digest = bytearray(hashlib.md5(data).digest())
    digest[6] = (digest[6] & 0x0F) | 0x30
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


class PlaceholderForms:
    """Every JSON spelling of one placeholder, precomputed for cheap membership tests."""

    def __init__(self, placeholder: bytes) -> None:
        text = placeholder.decode("utf-8", errors="replace")
        self.raw = placeholder
        self.text = text
        self.base64 = base64.b64encode(placeholder).decode()
        self.base64_url = base64.urlsafe_b64encode(placeholder).decode()
        self.uuid = name_based_uuid(placeholder)
        self.hstore_map = {text: text}
        self.hstore_json = orjson.dumps(self.hstore_map).decode()
        self.byte_ints = list(placeholder)
        self._strings = frozenset({text, self.base64, self.base64_url, self.hstore_json})
        # Longer strings are passed over on their length: testing one for membership hashes it
        # whole, and a row's large values were most of the cost of reading an event.
        self._longest = max(map(len, self._strings))
        self._lists = ([text], [self.base64], [self.base64_url], [self.uuid], self.byte_ints)

    def matches_shape(self, value: Any) -> bool:
        """Schemaless detection: any spelling of P."""
        if isinstance(value, str):
            return len(value) <= self._longest and value in self._strings
        if isinstance(value, list):
            return (len(value) == 1 or len(value) == len(self.byte_ints)) and value in self._lists
        if isinstance(value, dict):
            return value == self.hstore_map
        return False

    def shaped_columns(self, image: Mapping[str, Any]) -> tuple[str, ...]:
        """The columns of `image` whose value is any spelling of P. Strings are the common
        case and are tested inline: this runs for every column of every schemaless event."""
        strings, longest, matches = self._strings, self._longest, self.matches_shape
        return tuple(
            [
                column
                for column, value in image.items()
                if (
                    len(value) <= longest and value in strings
                    if type(value) is str
                    else type(value) in (list, dict) and matches(value)
                )
            ]
        )

    def matches_raw(self, value: Any, field: Mapping[str, Any]) -> bool:
        """Exact detection for a serialization that carries bytes as bytes (Avro): a bytes
        column holds P's own bytes, not their base64."""
        kind = field.get("type")
        if kind == "bytes":
            return value == self.raw
        if kind == "array" and (field.get("items") or {}).get("type") == "bytes":
            return value == [self.raw]
        return self.matches_schema(value, field)

    def matches_schema(self, value: Any, field: Mapping[str, Any]) -> bool:
        """Exact detection from a Kafka Connect field schema."""
        kind = field.get("type")
        if kind == "string":
            if value == self.text:
                return True
            return field.get("name") == JSON_NAME and value == self.hstore_json
        if kind == "bytes":
            return value == self.base64 or value == self.base64_url
        if kind == "map":
            return value == self.hstore_map
        if kind == "array" and isinstance(value, list):
            items = field.get("items") or {}
            item_kind = items.get("type")
            if item_kind == "string":
                expected = self.uuid if items.get("name") == UUID_NAME else self.text
                return value == [expected]
            if item_kind == "bytes":
                return value == [self.base64] or value == [self.base64_url]
            if item_kind in INTEGER_TYPES:
                return value == self.byte_ints
        return False
