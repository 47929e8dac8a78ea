"""Envelope formats: each decodes a Kafka record into a neutral ChangeEvent (hydrator.events)
and renders the core's Patch back into its envelope. This registry is the one place a format's
name is looked up."""

from __future__ import annotations

from hydrator.events import Codec
from hydrator.formats.cockroachdb import CockroachCodec
from hydrator.formats.debezium import DebeziumCodec
from hydrator.formats.options import FormatOptionError, FormatOptions
from hydrator.formats.placeholders import PlaceholderForms

FORMAT_NAMES = ("auto", "debezium", "cockroachdb", "cockroach")


def codec_for(name: str, options: FormatOptions | None = None) -> Codec:
    """The codec for `--format`; `auto` is Debezium until other formats arrive. Raises
    ValueError naming the format for an unknown one, FormatOptionError for an option the
    format does not take."""
    options = options or FormatOptions()
    if options.fill_absent and name != "debezium":
        # A patch stream is a property of one producer: `auto` guessing it per record would
        # fill columns of full-row events whose table dropped them.
        raise FormatOptionError(
            "--fill-absent", f"only with --format debezium (patch streams), not {name}"
        )
    if name in ("auto", "debezium"):
        return DebeziumCodec(PlaceholderForms(options.placeholder_bytes), options.fill_absent)
    if name in ("cockroachdb", "cockroach"):
        return CockroachCodec()
    raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMAT_NAMES)}")


__all__ = ["FORMAT_NAMES", "FormatOptionError", "FormatOptions", "codec_for"]
