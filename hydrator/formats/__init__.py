"""Envelope formats: each decodes a Kafka record into a neutral ChangeEvent (hydrator.events)
and renders the core's Patch back into its envelope. This registry is the one place a format's
name is looked up."""

from __future__ import annotations

from hydrator.events import Codec
from hydrator.formats.debezium import DebeziumCodec
from hydrator.formats.options import FormatOptions
from hydrator.formats.placeholders import PlaceholderForms

FORMAT_NAMES = ("auto", "debezium")


def codec_for(name: str, options: FormatOptions | None = None) -> Codec:
    """The codec for `--format`; `auto` is Debezium until other formats arrive. Raises
    ValueError naming the format for an unknown one."""
    options = options or FormatOptions()
    if name in ("auto", "debezium"):
        return DebeziumCodec(PlaceholderForms(options.placeholder_bytes))
    raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMAT_NAMES)}")


__all__ = ["FORMAT_NAMES", "FormatOptions", "codec_for"]
