"""The state record's bytes: a format byte, then msgpack (compact, and carries raw bytes of
parked records as they are). A later release reads every earlier format byte.

Format 1 is plain msgpack. Format 2 is the same layout, and may also hold integers wider than
64 bits (an image can: JSON numbers have no width) and decimals with their digits as msgpack
extensions (hydrator.exact); it is written only for a record that needs them, so state without
such numbers stays readable by releases that know only format 1.

Format 3 is format 2 whose image may hold large values (state/large.py) as msgpack extensions
(LARGE_VALUE: digest, packed size, and the compressed bytes when they are kept inline); it is
written only for a record that holds one, so every other record keeps format 1 or 2. Its
decimals are extension 3 (format 2's code for them, 2, is a large value here).

The body is a list of eight fields, a ninth (per-cell write times) only for a record that
has them, a tenth (the bootstrap mark, state.record) only for a bootstrapped record, and an
eleventh (the columns the state does not know, state.record) only for a record with such
columns; a later field present writes the earlier ones as null. Records without them keep the
bytes earlier releases wrote and read.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgpack

from hydrator import exact
from hydrator.errors import HydratorError
from hydrator.events import RawRecord
from state.handoff import Handoff
from state.large import (
    InlineReader,
    LargeValue,
    LargeValueReader,
    LazyImage,
    has_refs,
)
from state.record import StateRecord

FORMAT_V1 = 1
FORMAT_V2 = 2
FORMAT_V3 = 3
FORMATS = (FORMAT_V1, FORMAT_V2, FORMAT_V3)
# msgpack extension type codes of format 3: exact.WIDE_INT (1), then these two. (Formats 1 and 2
# write decimals under exact.DECIMAL, 2, which format 3 had already given to large values.)
LARGE_VALUE = 2
DECIMAL_V3 = 3


class StateFormatError(HydratorError, ValueError):
    """The bytes are not a state record this release can read."""


def encode_state(record: StateRecord) -> bytes:
    """The record's bytes. Its image may be a LazyImage, or hold LargeValue cells (from
    `state.large.outline`): those are written as references (format 3), never read."""
    image = record.image
    body: list[Any] = [
        image.cells if type(image) is LazyImage else image,
        list(record.pos) if record.pos is not None else None,
        record.deleted,
        record.updated_at_ms,
        [handoff.encode() for handoff in record.handoffs],
        [parked.to_tuple() for parked in record.parked],
        record.awaiting,
        record.waiting_since_ms,
    ]
    unknown = record.unknown
    if record.cell_times is not None or record.bootstrap is not None or unknown:
        body.append(record.cell_times)
    if record.bootstrap is not None or unknown:
        body.append(list(record.bootstrap) if record.bootstrap is not None else None)
    if unknown:
        body.append(list(unknown))
    cells = body[0]
    if type(cells) is dict and has_refs(cells):
        # told up front: packing first and catching msgpack's TypeError packed such rows twice
        return bytes([FORMAT_V3]) + msgpack.packb(body, use_bin_type=True, default=_pack_ext)
    try:
        packed, wide = exact.pack(body)
    except TypeError:  # a LargeValue deeper down: msgpack packs only what it knows
        return bytes([FORMAT_V3]) + msgpack.packb(body, use_bin_type=True, default=_pack_ext)
    return bytes([FORMAT_V2 if wide else FORMAT_V1]) + packed


def decode_state(data: bytes, reader: LargeValueReader | None = None) -> StateRecord:
    """The record in `data`. An image holding large values comes back as a LazyImage reading
    them through `reader` (by default, from the bytes inline)."""
    if not data:
        raise StateFormatError("empty state record")
    if data[0] not in FORMATS:
        raise StateFormatError(f"unknown state format byte {data[0]} (this release reads 1, 2, 3)")
    try:
        if data[0] == FORMAT_V3:
            body = msgpack.unpackb(data[1:], raw=False, strict_map_key=False, ext_hook=_unpack_ext)
        else:
            body = exact.unpack(data[1:], strict_map_key=False)
        if not isinstance(body, list) or len(body) not in (8, 9, 10, 11):
            raise ValueError("not a list of 8 to 11 fields")
        image, pos, deleted, updated_at, handoffs, parked, awaiting, waiting = body[:8]
        if data[0] == FORMAT_V3 and isinstance(image, dict) and has_refs(image):
            image = LazyImage(image, reader if reader is not None else InlineReader())
        return StateRecord(
            image=image,
            pos=tuple(pos) if pos is not None else None,
            deleted=deleted,
            updated_at_ms=updated_at,
            handoffs=tuple(Handoff.decode(item) for item in handoffs),
            parked=tuple(RawRecord.from_tuple(item) for item in parked),
            awaiting=awaiting,
            waiting_since_ms=waiting,
            cell_times=body[8] if len(body) >= 9 else None,
            bootstrap=tuple(body[9]) if len(body) >= 10 and body[9] is not None else None,
            unknown=_columns(body[10]) if len(body) == 11 else (),
        )
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        # whatever the bytes hold, they are not a state record: say so, never crash differently
        raise StateFormatError(f"corrupt state record: {type(exc).__name__}: {exc}") from None


def _columns(names: object) -> tuple[str, ...]:
    if not isinstance(names, list) or not all(type(name) is str for name in names):
        raise ValueError("the unknown columns are not a list of names")
    return tuple(names)


def _pack_ext(obj: object) -> msgpack.ExtType | dict:
    if type(obj) is LargeValue:
        fields = [obj.digest, obj.size, obj.compressed]
        return msgpack.ExtType(LARGE_VALUE, msgpack.packb(fields, use_bin_type=True))
    if type(obj) is LazyImage:
        return obj.cells
    if isinstance(obj, int):
        return msgpack.ExtType(exact.WIDE_INT, str(int(obj)).encode())
    if type(obj) is Decimal and obj.is_finite():
        return msgpack.ExtType(DECIMAL_V3, str(obj).encode())
    raise TypeError(f"cannot pack a {type(obj).__name__}")


def _unpack_ext(code: int, data: bytes) -> object:
    if code == LARGE_VALUE:
        digest, size, compressed = msgpack.unpackb(data, raw=False)
        if not (
            isinstance(digest, bytes) and type(size) is int and isinstance(compressed, bytes | None)
        ):
            raise ValueError("a large value reference with fields of the wrong type")
        return LargeValue(digest, size, compressed)
    if code == exact.WIDE_INT:
        return int(data)
    if code == DECIMAL_V3:
        number = Decimal(data.decode("ascii"))
        if not number.is_finite():
            raise ValueError(f"not a finite decimal: {data[:40]!r}")
        return number
    raise ValueError(f"unknown msgpack extension type {code}")
