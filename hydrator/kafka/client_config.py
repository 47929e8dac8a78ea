"""Building librdkafka configurations: the engine's settings plus the user's `-X` properties.

`-X name=value` applies to every client; `-X consumer.name=value`, `-X producer.name=value` and
`-X admin.name=value` to one kind only (SASL/SSL go to all, tuning usually to one). Properties the
engine's guarantees depend on cannot be overridden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ROLES = ("consumer", "producer", "admin")

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


class ClientConfigError(ValueError):
    """A `-X` property that is malformed or not allowed."""


def parse_properties(items: Iterable[str]) -> dict[str, str]:
    """`["a.b=1", "c=x=y"]` -> `{"a.b": "1", "c": "x=y"}`."""
    properties: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ClientConfigError(f"{item!r} is not name=value")
        properties[name] = value
    for name in properties:
        bare = _strip_role(name)[1]
        if bare in MANAGED:
            raise ClientConfigError(f"{bare} is set by the engine and cannot be overridden")
    return properties


def _strip_role(name: str) -> tuple[str | None, str]:
    role, dot, rest = name.partition(".")
    if dot and role in ROLES:
        return role, rest
    return None, name


@dataclass(frozen=True)
class ClientSettings:
    bootstrap_servers: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def for_role(
        self, role: str, engine_settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Engine defaults < `-X name` < `-X role.name`; bootstrap and managed keys last."""
        config: dict[str, Any] = {}
        role_specific: dict[str, str] = {}
        for name, value in self.properties.items():
            prop_role, bare = _strip_role(name)
            if prop_role is None:
                config[bare] = value
            elif prop_role == role:
                role_specific[bare] = value
        tunable = {k: v for k, v in (engine_settings or {}).items() if k not in MANAGED}
        managed = {k: v for k, v in (engine_settings or {}).items() if k in MANAGED}
        return {
            **tunable,
            **config,
            **role_specific,
            **managed,
            "bootstrap.servers": self.bootstrap_servers,
        }

    def consumer(self, engine_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.for_role("consumer", engine_settings)

    def producer(self, engine_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.for_role("producer", engine_settings)

    def admin(self, engine_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.for_role("admin", engine_settings)
