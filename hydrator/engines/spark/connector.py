"""The query's Kafka source and sink through Spark's own Kafka connector (spark-sql-kafka-0-10).

Source: `format("kafka")` over the inputs, the handoff topic and the bootstrap topic, with their
headers, read_committed, at most --max-offsets-per-trigger offsets a micro-batch; its rows are
turned into the columns the project's source gives (kafka_source.SOURCE_SCHEMA), so routing and
the group function read both alike. Sink: `format("kafka")` with explicit `topic`, `partition`,
`key`, `value` and `headers` columns: every record goes where the Python sink puts it, with the
same key bytes and headers, measured against its topic's limit before (sized_records.py).

The run's Kafka client properties (`-X`) are librdkafka's; each reaches the connector's Java
clients as a `kafka.`-prefixed option (the source's are the consumer's, the sink's the
producer's), translated where the Java client names the same setting differently (SASL's user
and password become its JAAS line). `-X connector.NAME=VALUE` passes the connector option NAME
as it is (`-X connector.kafka.ssl.truststore.location=…`, `-X connector.minPartitions=8`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hydrator.errors import ConfigurationError
from hydrator.kafka.client_config import properties_for_role
from hydrator.secrets import mask_setting

FORMAT = "kafka"
# `-X connector.NAME=VALUE`: the connector option NAME, untranslated.
CONNECTOR_PREFIX = "connector."
# Client properties the connector sets itself and refuses as options.
_REFUSED = {
    "auto.offset.reset": "startingOffsets",
    "enable.auto.commit": None,
    "key.deserializer": None,
    "value.deserializer": None,
    "key.serializer": None,
    "value.serializer": None,
    "interceptor.classes": None,
}
# librdkafka names whose Java client property has another name.
_RENAMED = {
    "sasl.mechanisms": "sasl.mechanism",
    "message.max.bytes": "max.request.size",
}
# Properties only librdkafka reads: the Java clients would warn about each at every start.
_LIBRDKAFKA_ONLY = {"sasl.username", "sasl.password", "ssl.ca.location"}
_JAVA_BUFFER_MEMORY = 32 * 1024 * 1024
_BUFFER_MARGIN = 1024 * 1024
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def split_properties(properties: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """-X properties as (client properties, raw connector options)."""
    clients: dict[str, str] = {}
    raw: dict[str, str] = {}
    for name, value in properties.items():
        if name.startswith(CONNECTOR_PREFIX) and len(name) > len(CONNECTOR_PREFIX):
            raw[name[len(CONNECTOR_PREFIX) :]] = value
        else:
            clients[name] = value
    return clients, raw


def client_options(properties: Mapping[str, str], role: str) -> dict[str, str]:
    """The `kafka.*` options for the connector's clients of `role` (consumer: the source,
    producer: the sink) from the run's librdkafka properties."""
    config = properties_for_role(properties, role)
    for name, instead in _REFUSED.items():
        if name in config:
            hint = f"; use -X {CONNECTOR_PREFIX}{instead}=…" if instead else ""
            raise ConfigurationError(
                f"-X {name}: Spark's Kafka connector sets it itself and refuses it{hint}"
            )
    java: dict[str, str] = {}
    for name, value in config.items():
        if name in _LIBRDKAFKA_ONLY:
            continue
        java[_RENAMED.get(name, name)] = value
    jaas = _jaas_config(config)
    if jaas is not None and "sasl.jaas.config" not in java:
        java["sasl.jaas.config"] = jaas
    if "ssl.ca.location" in config and "ssl.truststore.location" not in java:
        java["ssl.truststore.location"] = config["ssl.ca.location"]
        java.setdefault("ssl.truststore.type", "PEM")
    return {f"kafka.{name}": value for name, value in java.items()}


def _jaas_config(config: Mapping[str, str]) -> str | None:
    """librdkafka's `sasl.username`/`sasl.password` as the Java client's JAAS line."""
    user, password = config.get("sasl.username"), config.get("sasl.password")
    if user is None and password is None:
        return None
    mechanism = (config.get("sasl.mechanisms") or config.get("sasl.mechanism") or "GSSAPI").upper()
    module = _LOGIN_MODULES.get(mechanism)
    sasl = config.get("security.protocol", "").upper().startswith("SASL")
    if module is None and not sasl:
        return None  # neither client uses them: no SASL
    if module is None:
        raise ConfigurationError(
            f"-X sasl.username/sasl.password: Spark's Kafka connector takes them for PLAIN and "
            f"SCRAM only, not {mechanism}; give -X {CONNECTOR_PREFIX}kafka.sasl.jaas.config=…"
        )
    return f'{module} required username="{_quoted(user)}" password="{_quoted(password)}";'


def _quoted(text: str | None) -> str:
    return (text or "").replace("\\", "\\\\").replace('"', '\\"')


def source_options(
    bootstrap_servers: str,
    topics: list[str],
    properties: Mapping[str, str],
    max_offsets_per_trigger: int | None,
) -> dict[str, str]:
    clients, raw = split_properties(properties)
    options = {
        **client_options(clients, "consumer"),
        "kafka.bootstrap.servers": bootstrap_servers,
        "subscribe": ",".join(topics),
        "startingOffsets": "earliest",
        "includeHeaders": "true",
        "kafka.isolation.level": "read_committed",
        # The engine creates its topics; a consumer asking for a deleted input must not create
        # it again (the Java client would, on a broker that auto-creates): the run names it.
        "kafka.allow.auto.create.topics": "false",
    }
    if max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    return {**options, **raw}


def sink_options(
    bootstrap_servers: str,
    checkpoint: str,
    properties: Mapping[str, str],
    producer_max_bytes: int | None,
) -> dict[str, str]:
    clients, raw = split_properties(properties)
    options: dict[str, str] = {}
    if producer_max_bytes is not None:
        options["kafka.max.request.size"] = str(producer_max_bytes)
        # the Java producer refuses a record larger than its whole buffer (32 MiB by default)
        buffer = max(_JAVA_BUFFER_MEMORY, producer_max_bytes + _BUFFER_MARGIN)
        options["kafka.buffer.memory"] = str(buffer)
    options |= client_options(clients, "producer")  # -X may lower message.max.bytes
    options |= {"kafka.bootstrap.servers": bootstrap_servers, "checkpointLocation": checkpoint}
    return {**options, **raw}


def producer_limit(properties: Mapping[str, str], producer_max_bytes: int) -> int:
    """The largest record the sink's producer sends: the engine's, or a lower -X."""
    clients, _ = split_properties(properties)
    config = properties_for_role(clients, "producer")
    told = config.get("message.max.bytes") or config.get("max.request.size")
    if told is not None and told.strip().isdigit():
        return min(int(told), producer_max_bytes)
    return producer_max_bytes


def described(options: Mapping[str, str]) -> str:
    """The options as a log line shows them, secrets masked."""
    shown = []
    for name, value in sorted(options.items()):
        bare = name.removeprefix("kafka.")
        shown.append(f"{name}={mask_setting(bare, value)}")
    return ", ".join(shown)


def read_kafka(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The connector's rows as the project's source gives them (SOURCE_SCHEMA): the timestamp
    in milliseconds since the epoch."""
    reader = spark.readStream.format(FORMAT)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().select(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        F.unix_millis("timestamp").alias("timestamp"),
    )
