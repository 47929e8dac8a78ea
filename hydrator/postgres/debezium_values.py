"""Postgres values as Debezium's Postgres connector ships them through Kafka Connect's
JsonConverter, for the columns that can arrive as placeholders (docs/formats.md).

The connector settings in use are read off the placeholder the event shipped for the column,
which is spelled the way the column's values are (hydrator/formats/placeholders.py):

* text, varchar, json, jsonb, uuid, xml, tsvector, ranges, numeric (string mode) and the
  like: placeholder `"P"`; value: the column's text output (`::text`).
* bytea: base64 of P (`binary.handling.mode` bytes or base64): base64 of the bytes; url-safe
  base64 of P (base64-url-safe): url-safe base64; `"P"` (hex): lowercase hex.
* text[], varchar[], json[] and other arrays of text: `["P"]`: the elements' text.
* bytea[]: `[base64(P)]`: base64 of each element. uuid[]: `["<name-based uuid of P>"]`: uuid
  strings. int2[], int4[], int8[]: P's bytes as integers: the integers.
* hstore: `{"P": "P"}` (map mode): an object of the pairs; that object as a JSON string (json
  mode, the default): the pairs as a compact JSON string. The connector parses an hstore into a
  java.util.HashMap, so the pairs come in that map's iteration order (`java_hashmap_order`).

A column of any other type or shape is not encoded (`UNSUPPORTED`): its placeholder stays, and
`--on-unresolved` applies.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from hydrator.formats.placeholders import PlaceholderForms

UNSUPPORTED: Any = object()

INTEGER_TYPES = frozenset({"int2", "int4", "int8"})
TEXT_ELEMENT_EXCLUDED = frozenset({"bytea", *INTEGER_TYPES})


@dataclass(frozen=True, slots=True)
class PgColumn:
    """A column's type from the catalog: `type_name` (pg_type.typname), and for an array the
    element type's name."""

    name: str
    type_name: str
    element: str | None = None

    @property
    def is_array(self) -> bool:
        return self.element is not None


def select_expression(column: PgColumn, quoted: str) -> str:
    """The SQL that reads `column` (its quoted identifier `quoted`) in the shape `encode` takes:
    bytea, integer arrays, bytea arrays and hstore natively, everything else as text."""
    if column.type_name == "bytea":
        return quoted
    if column.type_name == "hstore":
        return f"hstore_to_array({quoted})"
    if column.is_array:
        if column.element in INTEGER_TYPES or column.element == "bytea":
            return quoted
        return f"{quoted}::text[]"
    return f"{quoted}::text"


def encode(column: PgColumn, raw: Any, shipped: Any, forms: PlaceholderForms) -> Any:
    """`raw` (read by `select_expression`'s SQL through psycopg) as the connector ships it, the
    spelling chosen by the placeholder `shipped` for it; UNSUPPORTED when the pair is not one
    this module knows."""
    if raw is None:
        return None
    if column.type_name == "bytea":
        return _bytes(raw, shipped, forms)
    if column.type_name == "hstore":
        return _hstore(raw, shipped, forms)
    if column.is_array:
        return _array(column, raw, shipped, forms)
    if isinstance(shipped, str) and shipped == forms.text and isinstance(raw, str):
        return raw
    return UNSUPPORTED


def _bytes(raw: Any, shipped: Any, forms: PlaceholderForms) -> Any:
    data = bytes(raw)
    if shipped == forms.text:
        return data.hex()
    if shipped == forms.base64:
        return base64.b64encode(data).decode()
    if shipped == forms.base64_url:
        return base64.urlsafe_b64encode(data).decode()
    return UNSUPPORTED


def _array(column: PgColumn, raw: Any, shipped: Any, forms: PlaceholderForms) -> Any:
    if not isinstance(raw, list) or not isinstance(shipped, list):
        return UNSUPPORTED
    if column.element in INTEGER_TYPES:
        return list(raw) if shipped == forms.byte_ints else UNSUPPORTED
    if column.element == "bytea":
        if shipped == [forms.base64]:
            return [None if v is None else base64.b64encode(bytes(v)).decode() for v in raw]
        return UNSUPPORTED
    if column.element == "uuid":
        if shipped == [forms.uuid]:
            return [None if v is None else str(uuid.UUID(str(v))) for v in raw]
        return UNSUPPORTED
    if shipped == [forms.text]:
        return list(raw)
    return UNSUPPORTED


def _hstore(raw: Any, shipped: Any, forms: PlaceholderForms) -> Any:
    """`raw` is `hstore_to_array`: keys and values alternating, in the hstore's own order (the
    order of its text output, which the connector parses)."""
    if not isinstance(raw, list):
        return UNSUPPORTED
    pairs = list(zip(raw[0::2], raw[1::2], strict=True))
    if shipped == forms.hstore_map:
        return dict(java_hashmap_order(pairs))
    if shipped == forms.hstore_json:
        return orjson.dumps(dict(java_hashmap_order(pairs))).decode()
    return UNSUPPORTED


def java_hashmap_order(pairs: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The iteration order of a java.util.HashMap the pairs were put into in this order: by
    bucket (the key's String.hashCode, spread, masked to the table size the map grew to), then
    in insertion order within a bucket (resizing keeps it)."""
    capacity = 16
    while len(pairs) > capacity * 3 // 4:
        capacity *= 2
    latest: dict[str, Any] = {}
    for key, value in pairs:  # a repeated key keeps its first place and takes the last value
        latest[key] = value
    buckets: dict[int, list[str]] = {}
    for key in latest:
        h = _java_string_hash(key)
        buckets.setdefault((h ^ (h >> 16)) & (capacity - 1), []).append(key)
    return [(key, latest[key]) for index in sorted(buckets) for key in buckets[index]]


def _java_string_hash(text: str) -> int:
    """String.hashCode as an unsigned 32-bit int (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def encode_row(
    columns: Mapping[str, PgColumn],
    raw: Mapping[str, Any],
    shipped: Mapping[str, Any],
    forms: PlaceholderForms,
) -> dict[str, Any]:
    """The encodable columns of a read row, for the placeholders `shipped` (column -> the
    placeholder the event carried for it); the others are left out."""
    out: dict[str, Any] = {}
    for name, placeholder in shipped.items():
        column = columns.get(name)
        if column is None or name not in raw:
            continue
        value = encode(column, raw[name], placeholder, forms)
        if value is not UNSUPPORTED:
            out[name] = value
    return out
