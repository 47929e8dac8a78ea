"""The state record's bytes: a format byte, then msgpack (compact, and carries raw bytes of
parked records as they are). A later release reads every earlier format byte.

Format 1 is plain msgpack. Format 2 is the same layout, and may also hold integers wider than
64 bits (an image can: JSON numbers have no width) and decimals with their digits as msgpack
extensions (hydrator.exact); it is written only for a record that needs them, so state without
such numbers stays readable by releases that know only format 1.

The body is a list of eight fields, and a ninth (per-cell write times) only for a record that
has them, so records without them keep the bytes earlier releases wrote and read.
"""

from __future__ import annotations

import msgpack

from hydrator import exact
from hydrator.events import RawRecord
from state.handoff import Handoff
from state.record import StateRecord

FORMAT_V1 = 1
FORMAT_V2 = 2
FORMATS = (FORMAT_V1, FORMAT_V2)


class StateFormatError(ValueError):
    """The bytes are not a state record this release can read."""


def encode_state(record: StateRecord) -> bytes:
    body = [
        record.image,
        list(record.pos) if record.pos is not None else None,
        record.deleted,
        record.updated_at_ms,
        [handoff.encode() for handoff in record.handoffs],
        [parked.to_tuple() for parked in record.parked],
        record.awaiting,
        record.waiting_since_ms,
    ]
    if record.cell_times is not None:
        body.append(record.cell_times)
    packed, wide = exact.pack(body)
    return bytes([FORMAT_V2 if wide else FORMAT_V1]) + packed


def decode_state(data: bytes) -> StateRecord:
    if not data:
        raise StateFormatError("empty state record")
    if data[0] not in FORMATS:
        raise StateFormatError(f"unknown state format byte {data[0]} (this release reads 1, 2)")
    try:
        body = exact.unpack(data[1:], strict_map_key=False)
        if not isinstance(body, list) or len(body) not in (8, 9):
            raise ValueError("not a list of 8 or 9 fields")
        image, pos, deleted, updated_at, handoffs, parked, awaiting, waiting = body[:8]
        return StateRecord(
            image=image,
            pos=tuple(pos) if pos is not None else None,
            deleted=deleted,
            updated_at_ms=updated_at,
            handoffs=tuple(Handoff.decode(item) for item in handoffs),
            parked=tuple(RawRecord.from_tuple(item) for item in parked),
            awaiting=awaiting,
            waiting_since_ms=waiting,
            cell_times=body[8] if len(body) == 9 else None,
        )
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        # whatever the bytes hold, they are not a state record: say so, never crash differently
        raise StateFormatError(f"corrupt state record: {type(exc).__name__}: {exc}") from None
