"""The demo's generated Avro stream (hydrator/demo/avro.py): JsonConverter records with their
Connect schemas turned into AvroConverter's framing, read back as the same JSON documents."""

from __future__ import annotations

from collections.abc import Iterator

import fastavro
import orjson
import pytest

from hydrator.demo.avro import AvroDocuments, AvroTranscoder, avro_schema, schema_id
from hydrator.demo.schema_registry import InMemorySchemaRegistry
from hydrator.demo.stream import DemoStream
from hydrator.demo.truth import payload
from hydrator.formats.keys import canonical_key


@pytest.fixture(scope="module")
def registry() -> Iterator[InMemorySchemaRegistry]:
    with InMemorySchemaRegistry() as running:
        yield running


def test_every_record_reads_back_as_the_json_it_came_from(
    registry: InMemorySchemaRegistry,
) -> None:
    stream = DemoStream(seed=3, keys=12, schemas=True)
    transcoder = AvroTranscoder(registry)
    documents = AvroDocuments(registry.url)
    records = stream.records(300)
    ids = set()
    for record in records:
        key = transcoder.record(stream.topic, "key", record.key)
        value = transcoder.record(stream.topic, "value", record.value)
        assert key is not None
        assert documents.key(key) == canonical_key(record.key)
        assert documents.value(value) == payload(record.value)
        ids.add(schema_id(value))
    # one key schema and one value schema, registered under the topic's subjects
    assert ids - {None} == {registry.subjects[f"{stream.topic}-value"][0]}
    assert set(registry.subjects) == {f"{stream.topic}-key", f"{stream.topic}-value"}
    assert any(r.value is None for r in records)  # tombstones stay tombstones


def test_the_envelope_schema_names_its_row_record_once() -> None:
    value = orjson.loads(DemoStream(schemas=True).records(1)[0].value or b"")
    schema = avro_schema(value["schema"], set())
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["before"]["type"][1]["name"] == "Value"
    assert fields["after"]["type"] == ["null", "demo.public.customers.Value"]
    assert fields["before"]["default"] is None
    fastavro.parse_schema(schema)  # a valid Avro schema
