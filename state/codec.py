"""The state record's bytes: a format byte, then msgpack (compact, and carries raw bytes of
parked records as they are). A later release reads every earlier format byte."""

from __future__ import annotations

import msgpack

from hydrator.core.records import Handoff, RawRecord
from state.record import StateRecord

FORMAT_V1 = 1


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
    return bytes([FORMAT_V1]) + msgpack.packb(body, use_bin_type=True)


def decode_state(data: bytes) -> StateRecord:
    if not data:
        raise StateFormatError("empty state record")
    if data[0] != FORMAT_V1:
        raise StateFormatError(f"unknown state format byte {data[0]} (this release reads 1)")
    try:
        image, pos, deleted, updated_at, handoffs, parked, awaiting, waiting = msgpack.unpackb(
            data[1:], raw=False, strict_map_key=False
        )
    except (ValueError, msgpack.UnpackException) as exc:
        raise StateFormatError(f"corrupt state record: {exc}") from None
    return StateRecord(
        image=image,
        pos=tuple(pos) if pos is not None else None,
        deleted=deleted,
        updated_at_ms=updated_at,
        handoffs=tuple(Handoff.decode(item) for item in handoffs),
        parked=tuple(RawRecord.from_tuple(item) for item in parked),
        awaiting=awaiting,
        waiting_since_ms=waiting,
    )
