"""Envelope formats: each decodes a Kafka record into a neutral ChangeEvent (hydrator.events)
and renders the core's Patch back into its envelope. This registry is the one place a format's
name is looked up; `--format auto` chooses among every format listed here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hydrator.events import Codec
from hydrator.formats.auto import AutoCodec
from hydrator.formats.cassandra import CassandraCodec
from hydrator.formats.cockroachdb import CockroachCodec
from hydrator.formats.debezium import DebeziumCodec
from hydrator.formats.flat import FlatCodec
from hydrator.formats.options import FormatOptionError, FormatOptions
from hydrator.formats.placeholders import PlaceholderForms
from hydrator.formats.ydb import YdbCodec


@dataclass(frozen=True)
class Format:
    name: str
    build: Callable[[FormatOptions], Codec]
    aliases: tuple[str, ...] = ()


# The order `--format auto` asks them in: a record is the first format that accepts its value.
# A format whose values another format's `accepts` would also take comes before that one, with
# a test in tests/unit/test_auto_format.py showing each format's records land where they belong.
FORMATS: tuple[Format, ...] = (
    # before Debezium, whose `accepts` takes any value with an `op`
    Format("cassandra", lambda _: CassandraCodec()),
    # before Debezium: a flattened row may have a column named `op`; only rows have `__op`
    # or `__deleted`
    Format(
        "debezium-flat",
        lambda options: FlatCodec(PlaceholderForms(options.placeholder_bytes)),
        aliases=("flat",),
    ),
    Format(
        "debezium",
        lambda options: DebeziumCodec(
            PlaceholderForms(options.placeholder_bytes), options.fill_absent
        ),
    ),
    Format("cockroachdb", lambda _: CockroachCodec(), aliases=("cockroach",)),
    Format("ydb", lambda _: YdbCodec()),
)

FORMAT_NAMES = ("auto", *(name for f in FORMATS for name in (f.name, *f.aliases)))


def codec_for(name: str, options: FormatOptions | None = None) -> Codec:
    """The codec for `--format`. Raises ValueError naming the format for an unknown one,
    FormatOptionError for an option the format does not take."""
    options = options or FormatOptions()
    if options.fill_absent and name != "debezium":
        # A patch stream is a property of one producer: `auto` guessing it per record would
        # fill columns of full-row events whose table dropped them.
        raise FormatOptionError(
            "--fill-absent", f"only with --format debezium (patch streams), not {name}"
        )
    if name == "auto":
        return AutoCodec([f.build(options) for f in FORMATS])
    for f in FORMATS:
        if name == f.name or name in f.aliases:
            return f.build(options)
    raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMAT_NAMES)}")


__all__ = ["FORMATS", "FORMAT_NAMES", "Format", "FormatOptionError", "FormatOptions", "codec_for"]
