"""Envelope formats: each decodes a Kafka record into a neutral ChangeEvent and encodes it back."""

from __future__ import annotations

from hydrator.core.settings import HydrationSettings
from hydrator.formats.base import BadInput, ChangeEvent, Codec, Op, Passthrough, Patch
from hydrator.formats.debezium import DebeziumCodec
from hydrator.formats.placeholders import PlaceholderForms

FORMAT_NAMES = ("auto", "debezium")


def codec_for(name: str, settings: HydrationSettings) -> Codec:
    """The codec for `--format`; `auto` is Debezium until other formats arrive."""
    if name in ("auto", "debezium"):
        return DebeziumCodec(PlaceholderForms(settings.placeholder_bytes))
    raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMAT_NAMES)}")


__all__ = [
    "FORMAT_NAMES",
    "BadInput",
    "ChangeEvent",
    "Codec",
    "Op",
    "Passthrough",
    "Patch",
    "codec_for",
]
