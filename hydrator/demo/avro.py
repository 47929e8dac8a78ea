"""Avro for `hydrator demo --source avro`: a generated stream written as Kafka Connect's
AvroConverter writes it, and the demo's records read back as JSON documents.

The generated stream (stream.py) comes out of Kafka Connect's JsonConverter with its schema
envelope; `AvroTranscoder` turns each record into what the AvroConverter makes of the same
Connect record: the Connect schema as an Avro schema (as Confluent's AvroData derives it:
optional fields a union with null, default null; structs named records with `connect.name`, a
record named once and referred to by name after), registered under `<topic>-key` /
`<topic>-value` (TopicNameStrategy), and the value Confluent-framed with its schema id (bytes
columns as bytes, not base64). Real Debezium needs none of this: the demo's bridge runs the real
AvroConverter (connect.py).

`AvroDocuments` reads framed records back with the schema their id names, as JSON documents
(bytes as base64, as JsonConverter writes them), so the demo compares and shows them as it does
JSON records.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from hydrator.demo.schema_registry import InMemorySchemaRegistry
from hydrator.formats.avro import (
    HEADER_BYTES,
    AvroKeys,
    frame,
    is_framed,
    json_ready,
    read,
    schema_id_of,
    write,
)
from hydrator.formats.registry import SchemaRegistry, WriterSchema, parse

_PRIMITIVES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}


def avro_schema(connect: dict[str, Any], named: set[str]) -> Any:
    """The Avro schema for a Kafka Connect schema (JsonConverter's JSON form); `named` holds the
    full names of the records already written out, which are then referred to by name."""
    kind = connect["type"]
    if kind == "struct":
        full_name = connect.get("name") or "ConnectDefault"
        if full_name in named:
            avro: Any = full_name
        else:
            named.add(full_name)
            namespace, _, name = full_name.rpartition(".")
            avro = {"type": "record", "name": name}
            if namespace:
                avro["namespace"] = namespace
            avro["fields"] = [_field(field, named) for field in connect["fields"]]
            avro["connect.name"] = full_name
    elif kind == "array":
        avro = {"type": "array", "items": avro_schema(connect["items"], named)}
    elif kind == "map":
        avro = {"type": "map", "values": avro_schema(connect["values"], named)}
    else:
        avro = _PRIMITIVES[kind]
        if "name" in connect:
            avro = {"type": avro, "connect.name": connect["name"]}
            if "version" in connect:
                avro["connect.version"] = connect["version"]
            if "parameters" in connect:
                avro["connect.parameters"] = connect["parameters"]
    return ["null", avro] if connect.get("optional") else avro


def _field(connect: dict[str, Any], named: set[str]) -> dict[str, Any]:
    field: dict[str, Any] = {"name": connect["field"], "type": avro_schema(connect, named)}
    if connect.get("optional"):
        field["default"] = None
    return field


def avro_datum(connect: dict[str, Any], value: Any) -> Any:
    """A JsonConverter payload value as the Avro datum of its schema (bytes from base64)."""
    if value is None:
        return None
    kind = connect["type"]
    if kind == "struct":
        return {f["field"]: avro_datum(f, value.get(f["field"])) for f in connect["fields"]}
    if kind == "array":
        return [avro_datum(connect["items"], item) for item in value]
    if kind == "map":
        return {k: avro_datum(connect["values"], v) for k, v in value.items()}
    if kind == "bytes":
        return base64.b64decode(value)
    return value


class AvroTranscoder:
    """JsonConverter records (with schemas) to AvroConverter records, schemas registered in
    `registry`."""

    def __init__(self, registry: InMemorySchemaRegistry) -> None:
        self.registry = registry
        self._schemas: dict[tuple[str, bytes], WriterSchema] = {}

    def record(self, topic: str, which: str, data: bytes | None) -> bytes | None:
        """`data` (a JsonConverter key or value of `topic`; `which` is "key" or "value"),
        Confluent-framed Avro; a tombstone stays None."""
        if data is None:
            return None
        document = orjson.loads(data)
        connect = document["schema"]
        schema = self._writer_schema(f"{topic}-{which}", connect)
        return frame(schema.schema_id, write(schema, avro_datum(connect, document["payload"])))

    def _writer_schema(self, subject: str, connect: dict[str, Any]) -> WriterSchema:
        cache_key = (subject, orjson.dumps(connect, option=orjson.OPT_SORT_KEYS))
        found = self._schemas.get(cache_key)
        if found is None:
            text = orjson.dumps(avro_schema(connect, set())).decode()
            found = parse(self.registry.register(subject, text), text)
            self._schemas[cache_key] = found
        return found


class AvroDocuments:
    """The demo's Avro records as JSON documents (truth.Documents), by the registry at `url`."""

    def __init__(self, url: str) -> None:
        self.registry = SchemaRegistry(url)
        self.keys = AvroKeys(self.registry)

    def value(self, data: bytes | None) -> dict[str, Any] | None:
        if data is None:
            return None
        document = json_ready(read(self.registry.schema(schema_id_of(data)), data[HEADER_BYTES:]))
        assert isinstance(document, dict)
        return document

    def key(self, data: bytes) -> str:
        return self.keys.canonical(data)


def schema_id(data: bytes | None) -> int | None:
    """The schema id a framed value carries; None for a tombstone or a JSON value."""
    return schema_id_of(data) if data is not None and is_framed(data) else None


__all__ = ["AvroDocuments", "AvroTranscoder", "avro_datum", "avro_schema", "schema_id"]
