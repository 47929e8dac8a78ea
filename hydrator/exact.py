"""Numbers that survive exactly: JSON in and out, and msgpack for what state keeps.

orjson is the fast path, but it reads an integer wider than 64 bits as a float
(`123456789012345678901234567890` becomes `1.2345678901234568e+29`) and refuses to write one.
`loads` therefore checks what orjson made for such floats, and only a document that holds one is
read again by the stdlib parser, which keeps every integer exact; `dumps` falls back to the stdlib
writer for a document orjson refuses. In msgpack, which packs at most 64 bits, a wider integer
travels as an extension type (WIDE_INT) holding its decimal digits.

A format whose JSON numbers can be DECIMAL columns (CockroachDB writes `1.10` as a number) reads
with `loads(raw, decimals=True)`: every number with a fraction or an exponent becomes a
`decimal.Decimal` holding its digits as written, so `1.10` is written back as `1.10`, never as
the nearest double. Python writes a Decimal in the General Decimal Arithmetic's scientific
string, the spelling CockroachDB's own decimals use, so such a number comes back byte for byte.
In msgpack a Decimal travels as an extension type (DECIMAL) holding that string.

This module imports nothing from the package, so formats, core and state can all use it.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Final

import msgpack
import orjson

from hydrator.errors import RecordError

# A float this large (either sign) may be an integer literal orjson could not hold; a real
# double that large is read again too, which costs time but changes nothing.
_WIDE: Final = 2.0**63
# msgpack's integer range: -2**63 .. 2**64-1.
MIN_PACKED_INT: Final = -(2**63)
MAX_PACKED_INT: Final = 2**64 - 1
WIDE_INT = 1  # msgpack extension type code: a decimal integer in ASCII
DECIMAL = 2  # msgpack extension type code: a Decimal's scientific string in ASCII
_ENVELOPE = b'{"schema":'
_ENVELOPE_SCHEMAS = 8


class ExactJSONError(RecordError, ValueError):
    """A document that cannot be read or written without changing it."""


def loads(raw: bytes | bytearray | memoryview | str, decimals: bool = False) -> Any:
    """The JSON document in `raw`, with every integer exact; with `decimals`, every other number
    a Decimal with its digits as written. Raises orjson.JSONDecodeError (a ValueError) for what
    orjson rejects (a number beyond a double's range among it), ExactJSONError for what the
    exact reader rejects."""
    document = orjson.loads(raw)
    try:
        again = _has_float(document) if decimals else _has_wide_float(document, raw)
    except RecursionError:  # orjson reads 1024 levels, more than Python's stack allows here
        raise ExactJSONError("nested too deeply") from None
    return _exact(raw, decimals) if again else document


def dumps(document: Any, sort_keys: bool = False) -> bytes:
    """`document` as compact JSON, Decimals as numbers with their digits. Raises ExactJSONError
    for what JSON cannot hold as it is (a string that is not valid Unicode, NaN, infinity)."""
    option = orjson.OPT_SORT_KEYS if sort_keys else None
    try:
        return orjson.dumps(document, default=_decimal_text, option=option)
    except TypeError:
        pass  # an integer wider than 64 bits, or a string orjson will not write: check below
    try:  # orjson writes wide integers handed to it as text
        return orjson.dumps(_wide_as_text(document), default=_decimal_text, option=option)
    except (TypeError, RecursionError):
        pass  # a string orjson will not write (a lenient key's lone surrogate)
    try:
        text = json.dumps(
            document,
            ensure_ascii=False,
            separators=(",", ":"),
            sort_keys=sort_keys,
            allow_nan=False,
        )
        return text.encode()
    except (ValueError, TypeError, RecursionError) as exc:
        raise ExactJSONError(f"cannot be written as JSON: {exc}") from None


def lenient_loads(raw: bytes) -> Any:
    """The stdlib parser in non-strict mode (control characters inside strings allowed), exact,
    refusing NaN and infinity as orjson does. Raises ExactJSONError, or ValueError."""
    try:
        return json.loads(raw, strict=False, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ExactJSONError("nested too deeply") from None


def pack(obj: Any) -> tuple[bytes, bool]:
    """msgpack bytes of `obj` (bytes as bin, str as str), and whether an extension type
    (WIDE_INT, DECIMAL) was needed: a reader that predates them must not be handed such bytes,
    so callers mark them."""
    try:
        return msgpack.packb(obj, use_bin_type=True), False
    except (OverflowError, TypeError):  # a wider integer, a Decimal (or what cannot be packed)
        return msgpack.packb(obj, use_bin_type=True, default=_pack_exact), True


def unpack(data: bytes, strict_map_key: bool = True) -> Any:
    """What `pack` packed, WIDE_INTs as ints, DECIMALs as Decimals."""
    return msgpack.unpackb(data, raw=False, strict_map_key=strict_map_key, ext_hook=_unpack_ext)


# -- internals ---------------------------------------------------------------------------------

_clean_schemas: tuple[bytes, ...] = ()


def _has_wide_float(document: Any, raw: bytes | bytearray | memoryview | str) -> bool:
    """Whether a float orjson made could stand for a wider integer. A Kafka Connect envelope
    repeats the same large schema on every record: its text, once found clean, is remembered,
    and a record that starts with it has only its payload walked. (A record that repeats the
    "schema" member, the last one winning, is not read again for a wide integer in that second
    schema; no converter writes one.)"""
    global _clean_schemas
    if type(document) is dict and "schema" in document and type(raw) is bytes:
        if _clean_schemas and raw.startswith(_clean_schemas):
            return any(_wide(value) for name, value in document.items() if name != "schema")
        if _wide(document):
            return True
        prefix = _schema_prefix(raw, document["schema"])
        if prefix is not None:
            _clean_schemas = (prefix, *_clean_schemas[: _ENVELOPE_SCHEMAS - 1])
        return False
    return _wide(document)


def _schema_prefix(raw: bytes, schema: Any) -> bytes | None:
    """`{"schema":<schema text>` when `raw` starts that way. A JSON value's text fixes where it
    ends, so a prefix that parses back to the whole schema spans exactly that value."""
    if not raw.startswith(_ENVELOPE):
        return None
    end = raw.find(b',"payload"')
    if end < 0:
        return None
    try:
        if orjson.loads(raw[len(_ENVELOPE) : end]) != schema:
            return None
    except orjson.JSONDecodeError:
        return None
    return raw[:end]


def _wide(value: Any) -> bool:
    """Whether `value` holds a float beyond 64-bit integers. This runs for every document:
    strings, ints and nulls (nearly every value) are passed over first."""
    kind = type(value)
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return kind is float and not -_WIDE < value < _WIDE
    for item in value:
        kind = type(item)
        if kind is str or kind is int or item is None or kind is bool:
            continue
        if kind is float:
            if not -_WIDE < item < _WIDE:
                return True
        elif _wide(item):
            return True
    return False


def has_float(document: Any) -> bool:
    """Whether a document `loads` read without `decimals` holds a number that `decimals` would
    read as a Decimal (so it must be read again for that)."""
    try:
        return _has_float(document)
    except RecursionError:
        return True  # the decimals read reports what is too deep


def _has_float(value: Any) -> bool:
    """Whether `value` holds a float anywhere (a number with a fraction or an exponent)."""
    kind = type(value)
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return kind is float
    for item in value:
        kind = type(item)
        if kind is str or kind is int or item is None or kind is bool:
            continue
        if kind is float or _has_float(item):
            return True
    return False


def _exact(raw: bytes | bytearray | memoryview | str, decimals: bool = False) -> Any:
    """Read again by the stdlib parser, whose integers are exact (and its other numbers Decimals
    when asked). orjson has accepted `raw` already, so only what the stdlib reads differently
    can fail here."""
    if isinstance(raw, memoryview | bytearray):
        raw = bytes(raw)
    try:
        if decimals:
            return json.loads(raw, parse_constant=_no_constant, parse_float=Decimal)
        return json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise ExactJSONError("nested too deeply") from None


def _decimal_text(obj: Any) -> orjson.Fragment:
    if type(obj) is Decimal and obj.is_finite():
        return orjson.Fragment(str(obj))
    raise TypeError(f"cannot write a {type(obj).__name__} as JSON: {obj!r:.40}")


def _wide_as_text(value: Any) -> Any:
    """`value` with every integer beyond 64 bits as a Fragment of its digits."""
    kind = type(value)
    if kind is int:
        return value if MIN_PACKED_INT <= value <= MAX_PACKED_INT else orjson.Fragment(str(value))
    if kind is dict:
        return {name: _wide_as_text(item) for name, item in value.items()}
    if kind is list:
        return [_wide_as_text(item) for item in value]
    return value


def _no_constant(name: str) -> Any:
    raise ExactJSONError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ExactJSONError(f"number {text[:40]} is too large for a double")
    return number


def _pack_exact(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, int):
        return msgpack.ExtType(WIDE_INT, str(int(obj)).encode())
    if type(obj) is Decimal and obj.is_finite():
        return msgpack.ExtType(DECIMAL, str(obj).encode())
    raise TypeError(f"cannot pack a {type(obj).__name__}")


def _unpack_ext(code: int, data: bytes) -> Any:
    if code == WIDE_INT:
        return int(data)
    if code == DECIMAL:
        number = Decimal(data.decode("ascii"))
        if not number.is_finite():
            raise ValueError(f"not a finite decimal: {data[:40]!r}")
        return number
    raise ValueError(f"unknown msgpack extension type {code}")
