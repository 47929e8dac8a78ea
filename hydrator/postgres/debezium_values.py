"""A Postgres column value as Debezium's Postgres connector ships it in JSON (Kafka Connect's
JsonConverter), for the connector settings in use. Pure functions over the value's text form
(or bytes, for bytea): a reader selects every column so that it arrives in the form its
encoder here takes (`select_expression`).

Two readers: the state bootstrap (hydrator/bootstrap/postgres.py) knows the connector's
settings from its configuration (`encoder`); the re-select fallback
(hydrator/reselect/client.py) knows only the placeholder an event shipped for the column, which
is spelled the way the column's values are
(hydrator/formats/placeholders.py), so it reads the settings off that spelling
(`shipped_encoder`, `encode_row`).

The same values with or without `schemas.enable`: the envelope differs, `after` does not.
Verified against real Debezium 3.6 snapshot events
(tests/integration/cold_start/test_bootstrap_postgres_values.py).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from hydrator.errors import ConfigurationError
from hydrator.formats.placeholders import PlaceholderForms

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)


class UnsupportedColumn(ConfigurationError, ValueError):
    """A column type the bootstrap cannot encode as Debezium would; the message names it."""


@dataclass(frozen=True)
class ConnectorSettings:
    """The Debezium connector settings that decide how a value is shipped (their defaults as in
    hydrator/demo/postgres-connector.json, else Debezium's own)."""

    binary_handling_mode: str = "bytes"
    decimal_handling_mode: str = "precise"
    hstore_handling_mode: str = "json"
    time_precision_mode: str = "adaptive"

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ConnectorSettings:
        settings = cls(
            config.get("binary.handling.mode", "bytes"),
            config.get("decimal.handling.mode", "precise"),
            config.get("hstore.handling.mode", "json"),
            config.get("time.precision.mode", "adaptive"),
        )
        allowed = {
            "binary.handling.mode": ("bytes", "hex", "base64", "base64-url-safe"),
            "decimal.handling.mode": ("precise", "string", "double"),
            "hstore.handling.mode": ("json", "map"),
            "time.precision.mode": ("adaptive", "adaptive_time_microseconds"),
        }
        for name, value in zip(allowed, settings.__dict__.values(), strict=True):
            if value not in allowed[name]:
                raise UnsupportedColumn(
                    f"connector setting {name}={value!r}: the bootstrap supports "
                    + ", ".join(allowed[name])
                )
        return settings


@dataclass(frozen=True)
class PgColumn:
    """One column as the catalog describes it: `type_name` is the element type's `typname`
    for an array (`is_array`), `precision`/`scale` come from the type modifier."""

    name: str
    type_name: str
    is_array: bool = False
    precision: int | None = None
    scale: int | None = None


_INTEGERS = frozenset({"int2", "int4", "int8", "oid"})
_FLOATS = frozenset({"float4", "float8"})
_TEXT_LIKE = frozenset(
    {
        "text", "varchar", "bpchar", "char", "name", "json", "jsonb", "xml", "uuid", "inet",
        "cidr", "macaddr", "macaddr8", "citext", "ltree", "tsvector", "tsquery",
        "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange", "bit",
        "varbit",
    }
)  # fmt: skip
_NUMERIC = frozenset({"numeric", "money"})


def select_expression(column: PgColumn, quoted: str) -> str:
    """The SQL that selects `column` (its quoted name) in the form `encoder` takes: bytea as
    bytes, everything else as its text output (arrays as text arrays)."""
    kind = column.type_name
    if kind == "bytea":
        return quoted
    if kind == "money":
        return f"{quoted}::numeric{'[]' if column.is_array else ''}::text{'[]' * column.is_array}"
    if kind == "bpchar" and not column.is_array:
        # a cast to text would strip the padding pgoutput ships
        return f"rpad({quoted}::text, {column.precision})" if column.precision else quoted
    if kind == "hstore":
        return f"{quoted}::text"
    return f"{quoted}::text[]" if column.is_array else f"{quoted}::text"


def encoder(column: PgColumn, settings: ConnectorSettings) -> Callable[[Any], Any]:
    """A function from the selected value (never None: NULL stays JSON null) to the JSON value
    Debezium ships for it. Raises UnsupportedColumn for a type it does not know."""
    element = _element_encoder(column, settings)
    if not column.is_array:
        return element
    if column.type_name in _NUMERIC or column.type_name == "hstore":
        raise UnsupportedColumn(f"column {column.name}: arrays of {column.type_name}")

    def array(values: list[Any]) -> list[Any]:
        return [None if v is None else element(v) for v in values]

    return array


def _element_encoder(column: PgColumn, settings: ConnectorSettings) -> Callable[[Any], Any]:
    kind = column.type_name
    if kind in _INTEGERS:
        return int
    if kind in _FLOATS:
        return _float
    if kind == "bool":
        return _bool
    if kind in _TEXT_LIKE:
        return str
    if kind == "bytea":
        return _bytes_encoder(settings.binary_handling_mode)
    if kind in _NUMERIC:
        scale = 2 if kind == "money" else column.scale
        return _decimal_encoder(settings.decimal_handling_mode, scale)
    if kind == "date":
        return lambda text: (dt.date.fromisoformat(text) - EPOCH_DATE).days
    if kind == "timestamp":
        return _timestamp_encoder(column.precision, settings)
    if kind == "timestamptz":
        return _zoned_timestamp_encoder(column.precision)
    if kind == "time":
        return _time_encoder(column.precision, settings)
    if kind == "hstore":
        return _hstore_encoder(settings.hstore_handling_mode)
    raise UnsupportedColumn(
        f"column {column.name}: type {kind}{'[]' if column.is_array else ''} is not supported "
        "by the bootstrap (docs/cold-start.md lists the types)"
    )


def _float(text: str) -> Any:
    value = float(text)
    return value if value == value and value not in (float("inf"), float("-inf")) else text


def _bool(text: str) -> bool:
    return text in ("true", "t")


def _bytes_encoder(mode: str) -> Callable[[bytes], str]:
    if mode == "hex":
        return lambda data: bytes(data).hex()
    if mode == "base64-url-safe":
        return lambda data: base64.urlsafe_b64encode(bytes(data)).decode()
    return lambda data: base64.b64encode(bytes(data)).decode()


def _unscaled_base64(unscaled: int) -> str:
    """Java's BigInteger.toByteArray (minimal two's complement, big-endian), base64."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def _decimal_encoder(mode: str, scale: int | None) -> Callable[[str], Any]:
    def encode(text: str) -> Any:
        if text == "NaN":
            return None if mode == "precise" else ("NaN" if mode == "string" else float("nan"))
        number = Decimal(text)
        if mode == "string":
            return text
        if mode == "double":
            return float(number)
        if scale is not None:
            return _unscaled_base64(int(number.scaleb(scale)))
        # a numeric without a declared scale: io.debezium.data.VariableScaleDecimal, whose
        # scale is the value's without trailing zeros
        exponent = number.normalize().as_tuple().exponent if number else 0
        assert isinstance(exponent, int)
        digits = max(0, -exponent)
        return {"scale": digits, "value": _unscaled_base64(int(number.scaleb(digits)))}

    return encode


def _parse_timestamp(text: str) -> dt.datetime:
    if text in ("infinity", "-infinity"):
        raise UnsupportedColumn(f"timestamp {text} is not supported by the bootstrap")
    return dt.datetime.fromisoformat(text)


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamp_encoder(precision: int | None, settings: ConnectorSettings) -> Callable[[str], int]:
    if precision is not None and precision <= 3:
        return lambda text: _micros(_parse_timestamp(text) - EPOCH) // 1000
    return lambda text: _micros(_parse_timestamp(text) - EPOCH)


def _zoned_timestamp_encoder(precision: int | None) -> Callable[[str], str]:
    """io.debezium.time.ZonedTimestamp: ISO-8601 in UTC, the fraction to the column's precision."""
    width = 6 if precision is None else precision

    def encode(text: str) -> str:
        moment = _parse_timestamp(text).astimezone(dt.UTC)
        base = moment.strftime("%Y-%m-%dT%H:%M:%S")
        if width:
            base += "." + f"{moment.microsecond:06d}"[:width]
        return base + "Z"

    return encode


def _time_encoder(precision: int | None, settings: ConnectorSettings) -> Callable[[str], int]:
    def micros(text: str) -> int:
        if text == "24:00:00":
            return 86_400_000_000
        moment = dt.time.fromisoformat(text)
        return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1_000_000 + (
            moment.microsecond
        )

    if (
        precision is not None
        and precision <= 3
        and settings.time_precision_mode != "adaptive_time_microseconds"
    ):
        return lambda text: micros(text) // 1000
    return micros


# -- hstore ----------------------------------------------------------------------------------------


def parse_hstore(text: str) -> list[tuple[str, str | None]]:
    """hstore's text output (`"k"=>"v", "k2"=>NULL`) as pairs, in its order."""
    pairs: list[tuple[str, str | None]] = []
    i, n = 0, len(text)

    def quoted(i: int) -> tuple[str, int]:
        assert text[i] == '"'
        out = []
        i += 1
        while text[i] != '"':
            if text[i] == "\\":
                i += 1
            out.append(text[i])
            i += 1
        return "".join(out), i + 1

    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i >= n:
            break
        key, i = quoted(i)
        assert text[i : i + 2] == "=>"
        i += 2
        if text.startswith("NULL", i):
            pairs.append((key, None))
            i += 4
        else:
            value, i = quoted(i)
            pairs.append((key, value))
    return pairs


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as an unsigned 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for j in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[j : j + 2], "big")) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: list[str]) -> list[str]:
    """The iteration order of a java.util.HashMap the keys were put into in this order (no
    tree bins: those need 8 keys in one bucket). Debezium parses an hstore into one and Jackson
    writes it in that order."""
    capacity = 16
    while len(keys) > capacity * 0.75:
        capacity *= 2
    buckets: dict[int, list[str]] = {}
    for key in keys:
        h = java_string_hash(key)
        spread = h ^ (h >> 16)
        buckets.setdefault(spread & (capacity - 1), []).append(key)
    return [key for index in sorted(buckets) for key in buckets[index]]


def _hstore_encoder(mode: str) -> Callable[[str], Any]:
    def encode(text: str) -> Any:
        pairs = dict(parse_hstore(text))
        ordered = {key: pairs[key] for key in java_hashmap_order(list(pairs))}
        if mode == "map":
            return ordered
        return orjson.dumps(ordered).decode()

    return encode


# -- by the placeholder an event shipped (the re-select fallback) ---------------------------------

_ARRAY_INTEGERS = frozenset({"int2", "int4", "int8"})


def shipped_encoder(
    column: PgColumn, shipped: Any, forms: PlaceholderForms
) -> Callable[[Any], Any] | None:
    """The encoder for `column`'s selected value, for an event that shipped the placeholder
    `shipped` for it; None when the pair is not one this module knows (the placeholder stays):

    * bytea: `"P"` hex, base64 of P base64 (`binary.handling.mode` bytes or base64), url-safe
      base64 of P base64-url-safe.
    * hstore: `{"P": "P"}` map mode, that object as a JSON string json mode.
    * int2[], int4[], int8[]: P's bytes as integers; bytea[]: `[base64(P)]`; uuid[]:
      `["<name-based uuid of P>"]`; any other array: `["P"]`, the elements' text.
    * any other type: `"P"`, the column's text output.
    """
    kind = column.type_name
    if column.is_array:
        if shipped != _shipped_array(kind, forms):
            return None
        known = kind in _ARRAY_INTEGERS or kind in ("bytea", "uuid")
        element = _element_encoder(column, ConnectorSettings("base64")) if known else str
        return lambda values: [None if v is None else element(v) for v in values]
    if not isinstance(shipped, str):
        return _hstore_encoder("map") if kind == "hstore" and shipped == forms.hstore_map else None
    if kind == "bytea":
        # in this order: P's base64 and url-safe base64 are one string unless P's has + or /
        for spelling, mode in (
            (forms.text, "hex"),
            (forms.base64, "base64"),
            (forms.base64_url, "base64-url-safe"),
        ):
            if shipped == spelling:
                return _bytes_encoder(mode)
        return None
    if kind == "hstore":
        return _hstore_encoder("json") if shipped == forms.hstore_json else None
    return str if shipped == forms.text else None


def _shipped_array(element: str, forms: PlaceholderForms) -> Any:
    if element in _ARRAY_INTEGERS:
        return forms.byte_ints
    if element == "bytea":
        return [forms.base64]
    if element == "uuid":
        return [forms.uuid]
    return [forms.text]


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
        value = raw[name]
        if value is None:
            out[name] = None
            continue
        encode = shipped_encoder(column, placeholder, forms)
        if encode is not None:
            out[name] = encode(value)
    return out
