"""What the format options of `hydrator run` ask of the codecs. A frozen value: the Spark
engine ships it to its executors, which build their codec from it (`codec_for`)."""

from __future__ import annotations

from dataclasses import dataclass

from hydrator.errors import ConfigurationError

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"


class FormatOptionError(ConfigurationError, ValueError):
    """An option the chosen format does not take; `option` is its command-line name."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True, slots=True)
class FormatOptions:
    placeholder: str = DEFAULT_PLACEHOLDER
    # Debezium patch streams: a stored column absent from an event was not shipped.
    fill_absent: bool = False
    # Confluent-framed Avro (docs/formats.md, "Avro with a schema registry"): the registry's
    # URL, its client settings (`basic.auth.user.info`, `ssl.ca.location`, ... as
    # confluent-kafka's SchemaRegistryClient takes them) and how long a registry that does not
    # answer is retried before the run stops for a restart.
    schema_registry_url: str | None = None
    schema_registry_config: tuple[tuple[str, str], ...] = ()
    schema_registry_wait_s: float = 60.0

    @property
    def placeholder_bytes(self) -> bytes:
        """`hex:`-prefixed placeholders are raw bytes, as Debezium's option reads them."""
        if self.placeholder.startswith("hex:"):
            return bytes.fromhex(self.placeholder[4:])
        return self.placeholder.encode()
