"""Building librdkafka configurations: the engine's settings plus the user's `-X` properties.

`-X name=value` applies to every client; `-X consumer.name=value`, `-X producer.name=value` and
`-X admin.name=value` to one kind only (SASL/SSL go to all, tuning usually to one). Properties the
engine's guarantees depend on cannot be overridden.

Values may be secrets (`sasl.password`, `ssl.key.password`): no message ever shows the value part
of an item, nor an item that has no `=` (it might be a value typed on its own). Secrets are best
given through HYDRATOR_KAFKA_PROPERTY or the config file: a command line is visible to every
local user in the process list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hydrator.errors import ConfigurationError

ROLES = ("consumer", "producer", "admin")

# Once its local queue is over queued.max.messages.kbytes, librdkafka stops fetching a partition
# for fetch.queue.backoff.ms (1 s by default), while a reader that keeps up drains that queue in a
# fraction of it and then waits: one embedded worker over a backlog waited for records a third of
# its time (13.9 s for the bench's 100,000 events, 11.4 s at 10 ms, the same CPU). The queue's
# bound on memory is unchanged.
FETCH_QUEUE_BACKOFF_MS = 10

# Exactly-once and co-partitioning rest on these; letting -X change them would silently break both.
MANAGED = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "transactional.id",
        "enable.idempotence",
        "isolation.level",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "partition.assignment.strategy",
        "group.protocol",
    }
)


# librdkafka property names, optionally with a role prefix.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Where one property of a whitespace-separated list ends: before the next `name=`.
_NEXT_PROPERTY = re.compile(r"\s+(?=[A-Za-z0-9][A-Za-z0-9._-]*=)")
_QUOTED_VALUE = re.compile(r'Invalid value "[^"]*" for')


class ClientConfigError(ConfigurationError, ValueError):
    """A `-X` property that is malformed or not allowed."""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def parse_properties(items: Iterable[str]) -> dict[str, str]:
    """`["a.b=1", "c=x=y"]` -> `{"a.b": "1", "c": "x=y"}`."""
    properties: dict[str, str] = {}
    for n, item in enumerate(items, 1):
        name, sep, value = str(item).partition("=")
        name = name.strip()
        if not sep:
            raise ClientConfigError(
                f"the {_ordinal(n)} item is not name=value (no '='); it is not shown, as it may "
                "hold a secret"
            )
        if not _NAME.fullmatch(name):
            raise ClientConfigError(
                f"the {_ordinal(n)} item has no property name before its '=' (a name is letters, "
                "digits, '.', '_' and '-'); it is not shown, as it may hold a secret"
            )
        properties[name] = value
    for name in properties:
        bare = _strip_role(name)[1]
        if bare in MANAGED:
            raise ClientConfigError(f"{bare} is set by the engine and cannot be overridden")
    return properties


def split_env_properties(text: str) -> list[str]:
    """HYDRATOR_KAFKA_PROPERTY: one property per line; on a single line, properties separated by
    whitespace, where a value may hold spaces (`sasl.password=two words`) as long as no part of
    it looks like `name=`."""
    text = text.strip()
    if not text:
        return []
    if "\n" in text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    return _NEXT_PROPERTY.split(text)


def client_error(reason: str, properties: Mapping[str, str]) -> ClientConfigError:
    """A librdkafka complaint about `-X` properties, with their values taken out."""
    reason = _QUOTED_VALUE.sub("Invalid value for", reason)
    # Longest first, so a value that contains another is removed whole.
    for value in sorted({v for v in properties.values() if len(v) >= 4}, key=len, reverse=True):
        reason = reason.replace(value, "***")
    return ClientConfigError(f"-X / --kafka-property: {reason}")


def _strip_role(name: str) -> tuple[str | None, str]:
    role, dot, rest = name.partition(".")
    if dot and role in ROLES:
        return role, rest
    return None, name


def properties_for_role(properties: Mapping[str, str], role: str) -> dict[str, str]:
    """What one kind of client takes of the `-X` properties: every unprefixed one, then those
    prefixed with its role (prefix removed, winning over the unprefixed). Another role's
    properties are left out: librdkafka rejects `consumer.x` as an unknown property."""
    if role not in ROLES:
        raise ValueError(f"unknown client role {role!r}; one of {', '.join(ROLES)}")
    shared: dict[str, str] = {}
    own: dict[str, str] = {}
    for name, value in properties.items():
        prop_role, bare = _strip_role(name)
        if prop_role is None:
            shared[bare] = value
        elif prop_role == role:
            own[bare] = value
    return {**shared, **own}


@dataclass(frozen=True)
class ClientSettings:
    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def for_role(
        self, role: str, engine_settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Engine defaults < `-X name` < `-X role.name`; bootstrap and managed keys last."""
        tunable = {k: v for k, v in (engine_settings or {}).items() if k not in MANAGED}
        managed = {k: v for k, v in (engine_settings or {}).items() if k in MANAGED}
        return {
            **tunable,
            **properties_for_role(self.properties, role),
            **managed,
            "bootstrap.servers": self.bootstrap_servers,
        }

    def consumer(self, engine_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.for_role("consumer", engine_settings)

    def producer(self, engine_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.for_role("producer", engine_settings)

    def admin(self, engine_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.for_role("admin", engine_settings)
