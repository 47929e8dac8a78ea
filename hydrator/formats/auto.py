"""`--format auto`: each record's format told from its value, among every registered format.

The registry hands this codec one codec per format in detection order; a record belongs to the
first whose `accepts(document)` takes its parsed value, and that codec names its key, decodes
it and renders its patch. Detection is per record, so one run may read topics of different
formats (and a topic may mix them). Where two formats' shapes overlap, the order decides, and
the registry says why it is safe (docs/formats.md, "Telling formats apart").

The value is parsed once per record: detection reads it through the record's Read
(hydrator.formats.values), the Read remembers the codec chosen, and that codec's `key` and
`decode` take the same Read, so they find the document detection parsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydrator.events import BadInput, ChangeEvent, Codec, Passthrough, Patch, Read
from hydrator.formats import values
from hydrator.formats.keys import canonical_key

_FIELDS_SHOWN = 8


class _Detected:
    """An event's envelope under auto: the codec that decoded it, and that codec's envelope."""

    __slots__ = ("codec", "envelope")

    def __init__(self, codec: Codec, envelope: Any) -> None:
        self.codec = codec
        self.envelope = envelope


class AutoCodec:
    name = "auto"

    def __init__(self, codecs: Sequence[Codec]) -> None:
        if not codecs:
            raise ValueError("--format auto needs at least one format to choose from")
        self.codecs = tuple(codecs)
        # Which format a record is comes from its value, so the Kafka key alone names the
        # record's state only when every format takes its identity from the Kafka key.
        self.key_in_record_key = all(codec.key_in_record_key for codec in self.codecs)
        self._tried = ", ".join(codec.name for codec in self.codecs)

    def accepts(self, document: Any) -> bool:
        return any(codec.accepts(document) for codec in self.codecs)

    def detect(self, document: Any) -> Codec:
        """The codec of the first format that accepts `document`; BadInput naming every format
        tried when none does."""
        for codec in self.codecs:
            if codec.accepts(document):
                return codec
        raise BadInput(f"no format takes this value: {_describe(document)}")

    def chosen(self, read: Read) -> Codec:
        """The codec of the record's format: detected from its parsed value, once per Read."""
        codec = read.chosen
        if codec is None:
            codec = read.chosen = self.detect(values.document(read))
        return codec

    def format_label(self, read: Read) -> str:
        """What a dead letter's reason says of the format: `auto (cockroachdb)` for a record
        detected as one, `auto (tried cassandra, debezium, ...)` for one none takes."""
        if read.chosen is not None:
            return f"auto ({read.chosen.name})"
        if read.record.value is not None:
            try:
                document = values.document(read)
            except Exception:
                document = None
            else:
                for codec in self.codecs:
                    if codec.accepts(document):
                        return f"auto ({codec.name})"
        return f"auto (tried {self._tried})"

    def key(self, read: Read) -> str | None:
        """The detected format's key. A Kafka tombstone has no value to tell its format by: its
        key is the Kafka key read as Debezium reads it, so it stays in line behind the records
        of its key (null for YDB, whose Kafka keys are null: passed through at once)."""
        record = read.record
        if record.value is None:
            return None if record.key is None else canonical_key(record.key)
        return self.chosen(read).key(read)

    def decode(self, read: Read) -> ChangeEvent | Passthrough:
        if read.record.value is None:
            return Passthrough("kafka tombstone")
        codec = self.chosen(read)
        decoded = codec.decode(read)
        if isinstance(decoded, ChangeEvent):
            decoded.envelope = _Detected(codec, decoded.envelope)
        return decoded

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes | None:
        detected: _Detected = event.envelope
        # The codec sees its own envelope; the event gets ours back, so encoding it twice works.
        event.envelope = detected.envelope
        try:
            return detected.codec.encode(event, patch)
        finally:
            event.envelope = detected


def _describe(document: Any) -> str:
    if isinstance(document, dict):
        fields = sorted(map(str, document))
        shown = ", ".join(fields[:_FIELDS_SHOWN]) + (", ..." if len(fields) > _FIELDS_SHOWN else "")
        return f"a JSON object with fields {shown}" if fields else "an empty JSON object"
    kind = {list: "array", str: "string", bool: "boolean"}.get(type(document))
    if kind is None:
        kind = "null" if document is None else "number"
    return f"a JSON {kind}, not an object"


__all__ = ["AutoCodec"]
