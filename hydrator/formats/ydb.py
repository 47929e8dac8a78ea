"""YDB changefeed records (`FORMAT = 'JSON'`, any `MODE`, with or without virtual timestamps),
as YDB's Kafka API delivers them: a null Kafka key, the row's identity in the value's `key`
array.

A change record holds `key` and exactly one of `update`, `reset` (a REPLACE: every column it
does not name is NULL) or `erase: {}`; `newImage`/`oldImage` when the changefeed's mode ships
them, and `ts: [step, txId]` with virtual timestamps. `{"resolved": [step, txId]}` is a barrier
sent to every partition, and `{"tableChanges": [...], "ts": [...]}` a schema change; both are
forwarded unchanged. The hydrated record is the input plus `newImage` and `oldImage` as
`MODE = 'NEW_AND_OLD_IMAGES'` carries them, added to the input's own text, so everything it held
stays byte for byte. Numbers are read exactly (hydrator.exact, `decimals`): a Uint64 or a wider
integer in a Json column digit for digit, a Double in the 17 digits YDB writes it with.

Nothing is stale by `ts`: YDB can give consecutive changes of one row the same virtual
timestamp, and it delivers each key's changes in order anyway.
"""

from __future__ import annotations

from typing import Any

from hydrator import exact
from hydrator.events import (
    Absent,
    BadInput,
    ChangeEvent,
    InvalidKey,
    Op,
    Passthrough,
    Patch,
    Read,
)
from hydrator.formats import values
from hydrator.formats.keys import canonical

OPERATIONS = ("update", "reset", "erase")
_ROW_FIELDS = ("key", *OPERATIONS, "newImage", "oldImage")
_MAX_UINT64 = 2**64 - 1


class _Envelope:
    """What encode() needs: the value's bytes and its document (never changed: encode may run
    twice for one event)."""

    __slots__ = ("document", "raw")

    def __init__(self, raw: bytes, document: dict[str, Any]) -> None:
        self.raw = raw
        self.document = document


class YdbCodec:
    name = "ydb"
    key_in_record_key = False

    def accepts(self, document: Any) -> bool:
        if not isinstance(document, dict):
            return False
        for barrier in ("resolved", "tableChanges"):
            if barrier in document:
                fields = any(name in document for name in _ROW_FIELDS)
                return isinstance(document[barrier], list) and not fields
        operations = sum(name in document for name in OPERATIONS)
        return operations == 1 and isinstance(document.get("key"), list)

    def key(self, read: Read) -> str | None:
        """The canonical `key` array of a change record; None for a Kafka tombstone, a barrier
        and a schema change (forwarded unchanged). The Kafka key is not read: through YDB's
        Kafka API it is null for every record."""
        if read.record.value is None:
            return None
        document = _checked(values.document(read))  # decode reads the same parse
        if _kind(document) is not None:
            return None
        key = document["key"]
        if not isinstance(key, list):
            raise InvalidKey(f"'key' is a JSON {_type(key)}, not an array")
        if not key:
            raise InvalidKey("'key' is an empty array")
        return canonical(key)

    def decode(self, read: Read) -> ChangeEvent | Passthrough:
        record = read.record
        if record.value is None:
            return Passthrough("kafka tombstone")
        document = _checked(values.document(read, decimals=True))
        kind = _kind(document)
        if kind is not None:
            return Passthrough(kind)
        operation = next(name for name in OPERATIONS if name in document)
        columns = document[operation]
        if not isinstance(columns, dict):
            raise BadInput(f"'{operation}' is a JSON {_type(columns)}, not an object")
        new_image = _image(document, "newImage")
        old_image = _image(document, "oldImage")
        envelope = _Envelope(record.value, document)
        if operation == "erase":
            if columns:
                raise BadInput("'erase' is not empty: it is always {}")
            return ChangeEvent(Op.DELETE, None, None, envelope=envelope)
        if new_image is not None:  # the full row after the change: it is the truth
            return ChangeEvent(Op.UPDATE, None, new_image, envelope=envelope)
        if old_image is not None:
            # MODE = 'OLD_IMAGE': the changed values are not shipped (`update` is an empty
            # flag), so the row after the change is unknown and must not be made up.
            return Passthrough("a change without its new values (MODE = 'OLD_IMAGE')")
        absent = Absent.MISSING if operation == "update" else Absent.NULL
        return ChangeEvent(Op.UPDATE, None, columns, envelope=envelope, absent=absent)

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes:
        """The input plus what `NEW_AND_OLD_IMAGES` carries that it lacks: `oldImage` (the
        stored row, the patch's whole `before`: absent when the row did not exist or under
        `--no-fill-before`) and, unless erased, `newImage`."""
        envelope: _Envelope = event.envelope
        document = envelope.document
        added: dict[str, Any] = {}
        if patch.whole_before is not None and "oldImage" not in document:
            added["oldImage"] = patch.whole_before
        if patch.new_image is not None and "newImage" not in document:  # None after an erase
            added["newImage"] = patch.new_image
        if not added:
            return envelope.raw
        members = exact.dumps(added)  # `{"oldImage":...,"newImage":...}`
        return values.with_members(envelope.raw, members[1:-1])


def _checked(document: Any) -> dict[str, Any]:
    """The value as a checked change record, barrier or schema change: what is wrong with it
    is the dead letter's reason, whether `key` or `decode` meets it first."""
    if not isinstance(document, dict):
        raise BadInput(f"value is a JSON {_type(document)}, not an object")
    kind = _kind(document)
    if kind == "resolved barrier":
        _virtual_timestamp(document["resolved"], "resolved")
        return document
    if kind == "schema change":
        return document
    operations = [name for name in OPERATIONS if name in document]
    if not operations:
        raise BadInput("not a YDB change record: none of 'update', 'reset', 'erase' or 'resolved'")
    if len(operations) > 1:
        raise BadInput(f"a YDB change record has one operation, this one {operations}")
    if "key" not in document:
        raise InvalidKey("a YDB change record without 'key'")
    if "ts" in document:
        _virtual_timestamp(document["ts"], "ts")
    return document


def _kind(document: dict[str, Any]) -> str | None:
    """What a record that is not a row change is (None for a row change)."""
    if "resolved" in document:
        if any(name in document for name in _ROW_FIELDS):
            raise BadInput("a 'resolved' barrier with the fields of a change record")
        return "resolved barrier"
    if "tableChanges" in document and not any(name in document for name in _ROW_FIELDS):
        if not isinstance(document["tableChanges"], list):
            raise BadInput("'tableChanges' is not an array")
        return "schema change"
    return None


def _virtual_timestamp(value: Any, name: str) -> None:
    if (
        type(value) is not list
        or len(value) != 2
        or any(type(part) is not int or not 0 <= part <= _MAX_UINT64 for part in value)
    ):
        raise BadInput(f"'{name}' is not a virtual timestamp [step, txId]: {value!r:.100}")


def _image(document: dict[str, Any], name: str) -> dict[str, Any] | None:
    image = document.get(name)
    if image is not None and not isinstance(image, dict):
        raise BadInput(f"'{name}' is a JSON {_type(image)}, not an object")
    return image


def _type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "null" if value is None else "number"
    )


__all__ = ["YdbCodec"]
