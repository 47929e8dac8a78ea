"""Spark's Kafka connector as the Spark engine's Kafka I/O, the parts that need no Spark: the
client properties as connector options, secrets masked, the checkpoint's mark, and the sink rows
(each record sized before Spark's sink)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hydrator.engines.spark import kafka_io
from hydrator.engines.spark.connector import (
    client_options,
    described,
    producer_limit,
    sink_options,
    source_options,
)
from hydrator.engines.spark.kafka_sink import pack_records
from hydrator.engines.spark.sink_rows import record_limits, unpacked
from hydrator.errors import ConfigurationError
from hydrator.kafka.record_limits import HEADER_ERROR
from hydrator.secrets import is_secret_name

SASL = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": 'pa"ss',
}


def test_librdkafka_sasl_settings_become_the_java_clients() -> None:
    options = client_options(SASL, "consumer")
    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="alice" password="pa\\"ss";',
    }


def test_role_prefixes_reach_one_side_only() -> None:
    properties = {"consumer.fetch.min.bytes": "10", "producer.linger.ms": "20", "acks": "all"}
    source = source_options("b:9092", ["in", "app-handoff"], properties, 500)
    sink = sink_options("b:9092", "file:///ck", properties, 2_000_000)
    assert source["kafka.fetch.min.bytes"] == "10" and "kafka.linger.ms" not in source
    assert sink["kafka.linger.ms"] == "20" and "kafka.fetch.min.bytes" not in sink
    assert source["kafka.acks"] == sink["kafka.acks"] == "all"
    assert source["subscribe"] == "in,app-handoff"
    assert source["includeHeaders"] == "true"
    assert source["kafka.isolation.level"] == "read_committed"
    assert source["maxOffsetsPerTrigger"] == "500"
    assert source["startingOffsets"] == "earliest"
    assert source["kafka.allow.auto.create.topics"] == "false"
    assert sink["kafka.max.request.size"] == "2000000"
    assert int(sink["kafka.buffer.memory"]) >= 32 * 1024 * 1024
    large = sink_options("b:9092", "file:///ck", {}, 49 * 1024 * 1024)
    assert int(large["kafka.buffer.memory"]) > 49 * 1024 * 1024  # room for the largest record
    assert sink["checkpointLocation"] == "file:///ck"


def test_raw_connector_options_pass_as_they_are() -> None:
    properties = {"connector.minPartitions": "8", "connector.kafka.ssl.keystore.type": "PEM"}
    source = source_options("b:9092", ["in"], properties, None)
    assert source["minPartitions"] == "8"
    assert source["kafka.ssl.keystore.type"] == "PEM"
    assert "maxOffsetsPerTrigger" not in source
    assert not any(name.startswith("connector.") for name in source)


def test_a_lower_message_max_bytes_lowers_the_sink_and_its_limit() -> None:
    properties = {"message.max.bytes": "500000"}
    assert sink_options("b", "ck", properties, 2_000_000)["kafka.max.request.size"] == "500000"
    assert producer_limit(properties, 2_000_000) == 500_000
    assert producer_limit({}, 2_000_000) == 2_000_000


def test_settings_the_connector_refuses_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"-X auto\.offset\.reset.*startingOffsets"):
        client_options({"auto.offset.reset": "latest"}, "consumer")
    kerberos = {"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"}
    with pytest.raises(ConfigurationError, match="GSSAPI"):
        client_options(kerberos, "consumer")
    # without SASL neither client reads them
    assert client_options({"sasl.username": "u", "sasl.password": "p"}, "consumer") == {}


def test_logged_options_mask_secrets() -> None:
    shown = described(
        {
            **client_options(SASL, "consumer"),
            "kafka.ssl.key.password": "hidden-too",
            "subscribe": "in",
        }
    )
    assert "pa" + '\\"ss' not in shown and "hidden-too" not in shown
    assert "kafka.sasl.jaas.config=***" in shown and "subscribe=in" in shown
    assert is_secret_name("connector.kafka.sasl.jaas.config")
    assert is_secret_name("connector.kafka.ssl.truststore.password")
    assert not is_secret_name("connector.minPartitions")


class Files:
    location = "memory:"

    def __init__(self, **files: bytes) -> None:
        self.files = dict(files)

    def read(self, name: str) -> bytes | None:
        return self.files.get(name)

    def write(self, name: str, data: bytes) -> None:
        self.files[name] = data


def test_a_new_checkpoint_is_marked_with_its_kafka_io() -> None:
    files = Files()
    kafka_io.check_checkpoint(files, kafka_io.CONNECTOR)
    assert files.files[kafka_io.MARKER] == b"connector\n"
    kafka_io.check_checkpoint(files, kafka_io.CONNECTOR)  # again: the same I/O goes on


def test_a_checkpoint_of_the_other_kafka_io_is_refused_naming_both() -> None:
    files = Files(**{kafka_io.MARKER: b"connector\n"})
    with pytest.raises(ConfigurationError) as refused:
        kafka_io.check_checkpoint(files, kafka_io.PYTHON)
    assert "--spark-kafka-io python" in str(refused.value)
    assert "written through the connector" in str(refused.value)


def test_an_unmarked_checkpoint_with_a_query_was_the_python_ios() -> None:
    files = Files(metadata=b'{"id":"q"}')
    with pytest.raises(ConfigurationError, match="written through the python"):
        kafka_io.check_checkpoint(files, kafka_io.CONNECTOR)
    kafka_io.check_checkpoint(files, kafka_io.PYTHON)
    assert files.files[kafka_io.MARKER] == b"python\n"


def test_sink_rows_keep_partition_key_and_headers_and_dead_letter_what_is_too_large() -> None:
    limits = record_limits("app-dlq", {"out": 1_000}, 1_000_000)
    fits = ("out", 3, b"k", b"v", [("hydrator.source", b"in:3:7"), ("empty", None)])
    large = ("out", 2, b"big", b"x" * 2_000, [("h", b"1")])
    cells = pa.RecordBatch.from_arrays(
        [pa.array([pack_records([fits, large]), None], pa.binary())], names=["records"]
    )
    (batch,) = list(unpacked(limits)(iter([cells])))
    rows = batch.to_pylist()
    assert rows[0] == {
        "topic": "out",
        "partition": 3,
        "key": b"k",
        "value": b"v",
        "headers": [
            {"key": "hydrator.source", "value": b"in:3:7"},
            {"key": "empty", "value": None},
        ],
    }
    dead = rows[1]
    assert dead["topic"] == "app-dlq" and dead["partition"] == 2 and dead["key"] == b"big"
    errors = [h["value"] for h in dead["headers"] if h["key"] == HEADER_ERROR]
    assert errors and b"over the topic's 1000-byte limit" in errors[0]
