"""Options shared by the project's Kafka source and sink for Spark.

Spark hands a data source its options as a case-insensitive mapping of strings. Everything under
`kafka.` goes to the confluent-kafka clients (SASL/SSL, timeouts, ...), like Spark's own Kafka
connector does; `kafka.consumer.*`, `kafka.producer.*` and `kafka.admin.*` go to one kind of client
only, as `-X consumer.…` does in the embedded engine (hydrator/kafka/client_config.py). A few client
properties the source and sink depend on are forced.
"""

from __future__ import annotations

from collections.abc import Mapping

from hydrator.errors import ConfigurationError
from hydrator.kafka.client_config import properties_for_role

KAFKA_PREFIX = "kafka."


class KafkaOptionError(ConfigurationError, ValueError):
    """A data source option is missing or malformed; the message names the option."""


def client_config(options: Mapping[str, str], role: str) -> dict[str, str]:
    """The `kafka.*` options as the librdkafka configuration of one kind of client (`role`:
    consumer, producer or admin), prefixes stripped."""
    properties = {
        key[len(KAFKA_PREFIX) :]: value
        for key, value in options.items()
        if key.lower().startswith(KAFKA_PREFIX)
    }
    config = properties_for_role(properties, role)
    # A bare `bootstrapServers` is accepted for convenience; `kafka.bootstrap.servers` wins.
    if "bootstrap.servers" not in config and options.get("bootstrapServers"):
        config["bootstrap.servers"] = options["bootstrapServers"]
    if not config.get("bootstrap.servers"):
        raise KafkaOptionError(
            "option 'kafka.bootstrap.servers' (or 'bootstrapServers') is required"
        )
    return config


def topics_option(options: Mapping[str, str], name: str = "topics") -> list[str]:
    raw = options.get(name) or options.get("subscribe") or ""
    topics = [t.strip() for t in raw.split(",") if t.strip()]
    if not topics:
        raise KafkaOptionError(f"option '{name}' (comma-separated topic names) is required")
    if len(set(topics)) != len(topics):
        raise KafkaOptionError(f"option '{name}' lists a topic twice: {raw!r}")
    return topics


def int_option(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise KafkaOptionError(f"option '{name}' must be an integer, got {raw!r}") from exc
    if value <= 0:
        raise KafkaOptionError(f"option '{name}' must be positive, got {value}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise KafkaOptionError(f"option '{name}' must be true or false, got {raw!r}")


def choice_option(
    options: Mapping[str, str], name: str, choices: tuple[str, ...], default: str
) -> str:
    value = str(options.get(name) or default).strip().lower()
    if value not in choices:
        raise KafkaOptionError(
            f"option '{name}' must be one of {', '.join(choices)}, got {value!r}"
        )
    return value
