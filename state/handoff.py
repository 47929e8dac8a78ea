"""A key change's old image on its way to the new key (docs/rules.md, rule 5): sent through the
handoff topic, kept in the new key's state until its CREATE takes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hydrator import exact


@dataclass(frozen=True, slots=True)
class Handoff:
    """The old image travelling from a primary key's old key to its new key (docs/rules.md, rule 5).

    `route_key` is the best reconstruction of the new key's raw Kafka key bytes, so an engine
    can send the handoff to the partition that owns the new key; state is keyed by `new_key`.
    """

    topic: str
    new_key: str
    old_key: str
    image: Mapping[str, Any] | None
    pos: tuple[int, ...] | None
    source: str
    route_key: bytes | None = None

    def __post_init__(self) -> None:
        # The old image leaves its key, whose large values (state/large.py) are collected once
        # the key's delete commits: a handoff carries every value itself.
        if self.image is not None and type(self.image) is not dict:
            object.__setattr__(self, "image", dict(self.image))

    def encode(self) -> bytes:
        """Version 1: msgpack; version 2 (only when needed, so that releases that know only 1
        read the others): the image holds integers wider than 64 bits or decimals
        (hydrator.exact)."""
        body = [
            1,
            self.topic,
            self.new_key,
            self.old_key,
            self.image,
            list(self.pos) if self.pos is not None else None,
            self.source,
            self.route_key,
        ]
        packed, wide = exact.pack(body)
        if wide:
            body[0] = 2
            packed, _ = exact.pack(body)
        return packed

    @classmethod
    def decode(cls, data: bytes) -> Handoff:
        """Raises ValueError for bytes that are not a handoff: anyone can write to the handoff
        topic, and a handoff of the wrong shape kept in state would fail the key's records."""
        body = exact.unpack(data)
        if not isinstance(body, list) or len(body) != 8:
            raise ValueError("not a handoff record")
        version, topic, new_key, old_key, image, pos, source, route_key = body
        if version not in (1, 2):
            raise ValueError(f"unknown handoff format version {version}")
        if not (
            isinstance(topic, str)
            and isinstance(new_key, str)
            and isinstance(old_key, str)
            and isinstance(image, dict | None)
            and (pos is None or (isinstance(pos, list) and all(type(p) is int for p in pos)))
            and isinstance(source, str)
            and isinstance(route_key, bytes | None)
        ):
            raise ValueError("a handoff record with fields of the wrong type")
        return cls(
            topic,
            new_key,
            old_key,
            image,
            tuple(pos) if pos is not None else None,
            source,
            route_key,
        )
