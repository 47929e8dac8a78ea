"""Writer schemas from a Confluent-compatible schema registry, by id, cached for the run.

confluent-kafka's SchemaRegistryClient does the HTTP (auth, TLS, its own cache); fastavro
parses the schema. Schemas are read with their logical types taken off, so every value keeps
the representation it has on the wire (a decimal's bytes, a timestamp's long): images copy
straight back into the same schema, as JSON values do.

A registry that does not answer (connection refused, a timeout, HTTP 5xx or 429) is retried
with a growing pause for up to `wait_s`, one log line per attempt, then `Unavailable`: never a
dead letter, the engine stops for a restart. An id the registry does not know (HTTP 404) is the
record's fault: BadInput.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from hydrator.events import BadInput, Unavailable

log = logging.getLogger(__name__)

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 15.0
_RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# client settings whose values are secrets (masked wherever settings are shown)
SECRET_SETTINGS = frozenset(
    {"basic.auth.user.info", "ssl.key.password", "bearer.auth.token", "bearer.auth.client.secret"}
)


class WriterSchema:
    """One registered schema: its id, its definition (logical types off, named types expanded
    where used) and fastavro's parse."""

    __slots__ = ("definition", "parsed", "schema_id")

    def __init__(self, schema_id: int, definition: Any, parsed: Any) -> None:
        self.schema_id = schema_id
        self.definition = definition
        self.parsed = parsed


def without_logical_types(schema: Any) -> Any:
    """The schema with every `logicalType` removed (values read and written as stored)."""
    if isinstance(schema, dict):
        return {k: without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [without_logical_types(s) for s in schema]
    return schema


def parse(schema_id: int, schema_text: str) -> WriterSchema:
    import fastavro

    try:
        definition = without_logical_types(orjson.loads(schema_text))
        # each schema its own namespace of names: versions of one record reuse its name
        parsed = fastavro.parse_schema(definition, named_schemas={})
        # named types written out where they are used, for reading column types
        definition = fastavro.parse_schema(definition, named_schemas={}, expand=True)
    except Exception as exc:  # a registry may hold anything under an id
        raise BadInput(
            f"schema id {schema_id} is not an Avro schema fastavro reads: {exc}"
        ) from None
    return WriterSchema(schema_id, definition, parsed)


class SchemaRegistry:
    """Schemas by id from the registry at `url`; built lazily (Spark builds codecs on its
    executors), shared by the threads of one process."""

    def __init__(
        self,
        url: str,
        settings: Mapping[str, str] | None = None,
        wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.settings = dict(settings or {})
        self.wait_s = wait_s
        self._sleep = sleep
        self._client: Any = None
        self._schemas: dict[int, WriterSchema] = {}
        self._lock = threading.Lock()

    def schema(self, schema_id: int) -> WriterSchema:
        found = self._schemas.get(schema_id)
        if found is None:
            found = parse(schema_id, self._fetch(schema_id))
            self._schemas[schema_id] = found
        return found

    def _client_for(self) -> Any:
        with self._lock:
            if self._client is None:
                from confluent_kafka.schema_registry import SchemaRegistryClient

                # retries are ours (logged, bounded by wait_s), not the client's
                self._client = SchemaRegistryClient(
                    {"max.retries": 0, "timeout": 10, **self.settings, "url": self.url}
                )
            return self._client

    def _fetch(self, schema_id: int) -> str:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        began = time.monotonic()
        attempt = 0
        while True:
            try:
                text: str = self._client_for().get_schema(schema_id).schema_str
                if attempt:
                    log.info("schema registry at %s answers again", self.url)
                return text
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404:
                    raise BadInput(
                        f"schema id {schema_id} is unknown to the schema registry at {self.url}"
                    ) from None
                if exc.http_status_code not in _RETRIED_STATUS:
                    # auth or a wrong URL: not the record's fault, and no wait mends it
                    raise Unavailable(f"schema registry at {self.url}: {exc}") from None
                reason = str(exc)
            except Exception as exc:  # httpx transport errors: refused, reset, timed out
                reason = f"{type(exc).__name__}: {exc}"
            waited = time.monotonic() - began
            if waited >= self.wait_s:
                raise Unavailable(
                    f"schema registry at {self.url} did not answer within {self.wait_s:.0f} s "
                    f"(reading schema id {schema_id}); last error: {reason}"
                )
            delay = min(MAX_RETRY_S, FIRST_RETRY_S * 2 ** min(attempt, 8), self.wait_s - waited)
            attempt += 1
            log.warning(
                "schema registry at %s does not answer (attempt %d: %s); retrying in %.0f s",
                self.url,
                attempt,
                reason,
                delay,
            )
            self._sleep(max(delay, 0.0))


__all__ = ["SECRET_SETTINGS", "SchemaRegistry", "WriterSchema", "parse", "without_logical_types"]
