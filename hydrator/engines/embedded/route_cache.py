"""Canonical keys by raw Kafka key, per task: routing a record whose codec keys it by its Kafka
key is then a lookup. A pure function of the key bytes, so nothing is ever stale; capped by
bytes (emptied when full). Keys longer than ROUTE_KEY_MAX are not remembered: they are rare,
and would crowd out the rest."""

from __future__ import annotations

from typing import Final

ROUTE_CACHE_BYTES: Final = 4 * 1024 * 1024
ROUTE_KEY_MAX: Final = 1024
ROUTE_ENTRY_OVERHEAD: Final = 160


class RouteCache:
    __slots__ = ("_routes", "_used")

    def __init__(self) -> None:
        self._routes: dict[bytes, str] = {}
        self._used = 0

    def get(self, raw_key: bytes) -> str | None:
        return self._routes.get(raw_key)

    def remember(self, raw_key: bytes, route: str) -> None:
        if len(raw_key) > ROUTE_KEY_MAX:
            return
        cost = len(raw_key) + len(route) + ROUTE_ENTRY_OVERHEAD
        if self._used + cost > ROUTE_CACHE_BYTES:
            self._routes.clear()
            self._used = 0
        self._routes[raw_key] = route
        self._used += cost
