"""The Debezium model's records as Kafka Connect's AvroConverter writes them: Avro schemas the
way AvroData derives them from the connector's Connect schemas (optional fields as unions with
null, `connect.name` on named types), registered in a registry, values Confluent-framed."""

from __future__ import annotations

import base64
import io
from typing import Any

import fastavro
import orjson

from hydrator.events import RawRecord
from hydrator.formats.avro import frame
from tests.support.debezium_model import DebeziumModel, Rendered, payload_of
from tests.support.flat_model import flatten

NS = "dbserver.public.t"


def _opt(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


def value_fields() -> list[dict[str, Any]]:
    return [
        {"name": "id", "type": "int"},
        {"name": "small", "type": _opt("int"), "default": None},
        {"name": "txt", "type": _opt("string"), "default": None},
        {
            "name": "doc",
            "type": _opt({"type": "string", "connect.name": "io.debezium.data.Json"}),
            "default": None,
        },
        {"name": "bin", "type": _opt("bytes"), "default": None},
        {"name": "tags", "type": _opt({"type": "array", "items": _opt("string")}), "default": None},
        {"name": "nums", "type": _opt({"type": "array", "items": _opt("long")}), "default": None},
        {
            "name": "ids",
            "type": _opt(
                {
                    "type": "array",
                    "items": _opt({"type": "string", "connect.name": "io.debezium.data.Uuid"}),
                }
            ),
            "default": None,
        },
        {"name": "attrs", "type": _opt({"type": "map", "values": _opt("string")}), "default": None},
    ]


def row_schema(fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Value",
        "namespace": NS,
        "fields": fields or value_fields(),
        "connect.name": f"{NS}.Value",
    }


SOURCE = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.postgresql",
    "fields": [
        {"name": "connector", "type": "string"},
        {"name": "lsn", "type": _opt("long"), "default": None},
        {"name": "sequence", "type": _opt("string"), "default": None},
    ],
}


def envelope_schema(fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": NS,
        "fields": [
            {"name": "before", "type": _opt(row_schema(fields)), "default": None},
            {"name": "after", "type": _opt(f"{NS}.Value"), "default": None},
            {"name": "source", "type": SOURCE},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": _opt("long"), "default": None},
        ],
        "connect.name": f"{NS}.Envelope",
    }


def flat_schema() -> dict[str, Any]:
    extra = [
        {"name": "__op", "type": _opt("string"), "default": None},
        {"name": "__lsn", "type": _opt("long"), "default": None},
        {"name": "__source_sequence", "type": _opt("string"), "default": None},
        {"name": "__deleted", "type": _opt("string"), "default": None},
    ]
    return row_schema([*value_fields(), *extra])


KEY_SCHEMA = {
    "type": "record",
    "name": "Key",
    "namespace": NS,
    "fields": [{"name": "id", "type": "int"}],
    "connect.name": f"{NS}.Key",
}


def encode(schema: dict[str, Any], schema_id: int, document: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas={}), document)
    return frame(schema_id, out.getvalue())


def decode(schema: dict[str, Any], data: bytes) -> Any:
    parsed = fastavro.parse_schema(schema, named_schemas={})
    return fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed)


def avro_row(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A JSON-converter row as Avro carries it: bytes as bytes, not base64."""
    if row is None:
        return None
    out = dict(row)
    if isinstance(out.get("bin"), str):
        out["bin"] = base64.b64decode(out["bin"])
    return out


class AvroLog:
    """The model's log, Avro-framed (`envelope` "debezium" or "flat"), keys framed too."""

    def __init__(self, model: DebeziumModel, ids: dict[str, int], envelope: str) -> None:
        self.ids = ids
        self.log: list[Rendered] = []
        for rendered in model.log:
            record = rendered.default
            key = encode(KEY_SCHEMA, ids["key"], orjson.loads(record.key or b"{}"))
            if envelope == "flat":
                flat = flatten(record.value)
                if flat is False:
                    continue
                assert isinstance(flat, bytes)
                row = orjson.loads(flat)
                row["bin"] = avro_row(row)["bin"]  # type: ignore[index]
                value: bytes | None = encode(flat_schema(), ids["flat"], row)
            elif record.value is None:
                value = None
            else:
                payload = payload_of(record.value)
                payload = {
                    **payload,
                    "before": avro_row(payload["before"]),
                    "after": avro_row(payload["after"]),
                }
                value = encode(envelope_schema(), ids["envelope"], payload)
            again = RawRecord(
                record.topic, record.partition, record.offset, key, value, record.headers
            )
            self.log.append(
                Rendered(again, rendered.full_value, rendered.key_id, rendered.duplicate)
            )
