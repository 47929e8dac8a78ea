"""Confluent-framed Avro (Kafka Connect's AvroConverter): a zero byte, the writer schema's id
(4 bytes, big-endian), then the Avro binary record.

This codec wraps the run's JSON codec: a framed value is decoded with its writer schema (from
the registry, cached by id) and handed to the Debezium envelope's or the flattened row's rules
as a document; the patch is rendered into that document and written back with the SAME schema
id, so existing Avro consumers read the output unchanged. A value that is not framed goes to the
JSON codec as before. Key bytes stay as they came; a framed key is decoded (for the canonical
key) with its own schema.

Placeholders: the writer schema gives each column's type, so detection is exact, as with a
Kafka Connect JSON schema; bytes carry P's own bytes (not base64).
Schema evolution: a record with another schema id is filled from the stored image column by
column; a stored column its schema lacks is not written (the schema does not have it), a new
column stays as the event has it.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from hydrator import exact
from hydrator.events import (
    BadInput,
    ChangeEvent,
    Codec,
    InvalidKey,
    Passthrough,
    Patch,
    Read,
)
from hydrator.formats.debezium import DebeziumCodec
from hydrator.formats.flat import FlatCodec, is_flat, require_key
from hydrator.formats.keys import canonical, canonical_key
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.formats.registry import SchemaRegistry, WriterSchema

MAGIC = 0
HEADER_BYTES = 5
Envelope = DebeziumCodec | FlatCodec
ColumnTypes = Mapping[str, Mapping[str, Any]]


def is_framed(data: bytes | None) -> bool:
    """A Confluent-framed value: JSON text never starts with a zero byte."""
    return data is not None and len(data) >= HEADER_BYTES and data[0] == MAGIC


def frame(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def schema_id_of(data: bytes) -> int:
    return int.from_bytes(data[1:HEADER_BYTES], "big")


class _Avro:
    """An event's envelope under Avro: its writer schema, and the envelope codec's own."""

    __slots__ = ("codec", "inner", "schema")

    def __init__(self, codec: Envelope, schema: WriterSchema, inner: Any) -> None:
        self.codec = codec
        self.schema = schema
        self.inner = inner


class AvroCodec:
    """Framed Avro values and keys, around the JSON codec `plain` (docs/formats.md)."""

    def __init__(
        self,
        plain: Codec,
        envelopes: Sequence[Envelope],
        registry: SchemaRegistry,
        forms: PlaceholderForms,
    ) -> None:
        self.plain = plain
        self.name = plain.name
        self.key_in_record_key = plain.key_in_record_key
        self.envelopes = tuple(envelopes)
        self.registry = registry
        self.forms = forms
        self.keys = AvroKeys(registry)
        self._columns: dict[tuple[int, str], ColumnTypes] = {}

    # -- the Codec interface ---------------------------------------------------------------

    def accepts(self, document: Any) -> bool:
        return self.plain.accepts(document)

    def key(self, incoming: Read) -> str | None:
        record = incoming.record
        if record.key is None:
            if is_framed(record.value) and self._flat_only():
                return require_key(None, canonical_key)
            return None if is_framed(record.value) else self.plain.key(incoming)
        if is_framed(record.key):
            return self.keys.canonical(record.key)
        if is_framed(record.value):
            return canonical_key(record.key)
        return self.plain.key(incoming)

    def decode(self, incoming: Read) -> ChangeEvent | Passthrough:
        # `incoming`: `read` is this module's Avro reader
        record = incoming.record
        if record.value is None and is_framed(record.key) and self._flat_only():
            flat = self.envelopes[0]
            assert isinstance(flat, FlatCodec)
            return flat.decode_row(record, None, None, _nothing_missing, self.keys)
        if not is_framed(record.value):
            return self.plain.decode(incoming)
        assert record.value is not None
        schema = self.registry.schema(schema_id_of(record.value))
        document = read(schema, record.value[HEADER_BYTES:])
        codec = self._envelope_of(document, schema)
        if isinstance(codec, FlatCodec):
            columns = self._column_types(schema, "row")
            event: ChangeEvent | Passthrough = codec.decode_row(
                record, document, document, self._missing_in(columns), self.keys
            )
        else:
            event = codec.decode_document(
                record,
                document,
                document,
                lambda image, name: (
                    self._missing_in(self._column_types(schema, name))(image) if image else ()
                ),
                self.keys,
            )
        if isinstance(event, ChangeEvent):
            event.envelope = _Avro(codec, schema, event.envelope)
        return event

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes | None:
        envelope = event.envelope
        if not isinstance(envelope, _Avro):
            return self.plain.encode(event, patch)
        if not patch:
            raw: bytes | None = envelope.inner.raw
            return raw
        event.envelope = envelope.inner  # the envelope codec renders its own
        try:
            document = envelope.codec.render(event, patch)
        finally:
            event.envelope = envelope
        if document is None:
            return None
        return frame(envelope.schema.schema_id, write(envelope.schema, document))

    # -- helpers -------------------------------------------------------------------------------

    def _flat_only(self) -> bool:
        return len(self.envelopes) == 1 and isinstance(self.envelopes[0], FlatCodec)

    def _envelope_of(self, document: Any, schema: WriterSchema) -> Envelope:
        if len(self.envelopes) == 1:
            return self.envelopes[0]
        for codec in self.envelopes:
            if isinstance(codec, FlatCodec) and is_flat(document):
                return codec
            if isinstance(codec, DebeziumCodec) and isinstance(document, dict) and "op" in document:
                return codec
        raise BadInput(
            f"Avro record of schema id {schema.schema_id} is neither a Debezium change event "
            "(no 'op') nor a flattened row (no '__op' or '__deleted')"
        )

    def _column_types(self, schema: WriterSchema, image: str) -> ColumnTypes:
        """Column name -> a Kafka Connect style field schema (`type`, `name`, `items`) of the
        row (`row`) or of the envelope's `before`/`after`, from the writer schema."""
        found = self._columns.get((schema.schema_id, image))
        if found is None:
            found = column_types(schema.definition, image)
            self._columns[(schema.schema_id, image)] = found
        return found

    def _missing_in(self, types: ColumnTypes) -> Any:
        matches = self.forms.matches_raw

        def missing(image: dict[str, Any]) -> tuple[str, ...]:
            return tuple(
                c
                for c, v in image.items()
                if v is not None and (t := types.get(c)) is not None and matches(v, t)
            )

        return missing


class AvroKeys:
    """Framed Avro keys: their columns, their canonical spelling (the JSON the
    `__debezium.oldkey/newkey` headers carry) and a new key's bytes for a key change's handoff,
    framed with the old key's schema id, as the converter would write it."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry

    def document(self, raw: bytes) -> Any:
        try:
            schema = self.registry.schema(schema_id_of(raw))
            return read(schema, raw[HEADER_BYTES:])
        except BadInput as exc:
            raise InvalidKey(f"key: {exc}") from None

    def canonical(self, raw: bytes) -> str:
        return canonical(_json_ready(self.document(raw)))

    def columns(self, raw_key: bytes | None) -> frozenset[str]:
        if raw_key is None:
            return frozenset()
        if not is_framed(raw_key):
            from hydrator.formats.debezium import JSON_KEYS

            return JSON_KEYS.columns(raw_key)
        document = self.document(raw_key)
        return frozenset(document) if isinstance(document, dict) else frozenset()

    def route(self, old_raw_key: bytes | None, new_key_header: bytes | None) -> bytes | None:
        if old_raw_key is None or new_key_header is None:
            return None
        if not is_framed(old_raw_key):
            from hydrator.formats.debezium import JSON_KEYS

            return JSON_KEYS.route(old_raw_key, new_key_header)
        try:
            new_key = exact.loads(new_key_header)
            schema = self.registry.schema(schema_id_of(old_raw_key))
            return frame(schema.schema_id, write(schema, new_key))
        except (ValueError, TypeError, KeyError):
            return None


def read(schema: WriterSchema, body: bytes) -> Any:
    """The Avro binary `body` decoded with its writer schema; BadInput naming the schema id
    when the bytes do not decode with it (or leave bytes over)."""
    import fastavro

    stream = io.BytesIO(body)
    try:
        document = fastavro.schemaless_reader(stream, schema.parsed)
    except Exception as exc:  # EOFError, bad union index, invalid UTF-8, ...
        raise BadInput(
            f"value does not decode with schema id {schema.schema_id}: {type(exc).__name__}: {exc}"
        ) from None
    left = len(body) - stream.tell()
    if left:
        raise BadInput(
            f"value does not decode with schema id {schema.schema_id}: {left} bytes left over "
            "after the record"
        )
    return document


def write(schema: WriterSchema, document: Any) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema.parsed, document)
    return out.getvalue()


def column_types(definition: Any, image: str) -> dict[str, dict[str, Any]]:
    """Column -> Connect-style field schema, for the row (`image` "row") or an envelope's
    `before`/`after` record."""
    record = _non_null(definition)
    if image != "row":
        fields = {f["name"]: f["type"] for f in record.get("fields", ())}
        if image not in fields:
            raise BadInput(f"Avro schema has no {image!r} field")
        record = _non_null(fields[image])
    if not isinstance(record, dict) or record.get("type") != "record":
        raise BadInput(f"Avro schema's {image!r} is not a record")
    return {f["name"]: connect_type(f["type"]) for f in record["fields"]}


def connect_type(avro_type: Any) -> dict[str, Any]:
    """A Kafka Connect style field schema for an Avro type (what placeholder detection reads):
    `type` string/bytes/array/map/int32/int64/..., `name` from `connect.name`, `items`."""
    avro_type = _non_null(avro_type)
    if isinstance(avro_type, str):
        return {"type": _PRIMITIVES.get(avro_type, avro_type)}
    kind = avro_type.get("type")
    out: dict[str, Any] = {"type": _PRIMITIVES.get(kind, kind)}
    if "connect.name" in avro_type:
        out["name"] = avro_type["connect.name"]
    if kind == "array":
        out["items"] = connect_type(avro_type.get("items"))
    return out


_PRIMITIVES = {"int": "int32", "long": "int64", "float": "float32", "double": "float64"}


def _non_null(avro_type: Any) -> Any:
    if isinstance(avro_type, list):
        others = [t for t in avro_type if t != "null"]
        return others[0] if len(others) == 1 else avro_type
    return avro_type


def _json_ready(document: Any) -> Any:
    """An Avro key document as JSON would spell it (bytes as base64, as JsonConverter does)."""
    if isinstance(document, bytes):
        return base64.b64encode(document).decode()
    if isinstance(document, dict):
        return {k: _json_ready(v) for k, v in document.items()}
    if isinstance(document, list):
        return [_json_ready(v) for v in document]
    return document


json_ready = _json_ready  # for readers that show decoded records as JSON (the demo)


def _nothing_missing(_image: dict[str, Any]) -> tuple[str, ...]:
    return ()


__all__ = ["AvroCodec", "AvroKeys", "frame", "is_framed", "read", "schema_id_of", "write"]
