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
# a test in tests/unit/formats/test_auto_format.py showing each format's records land where
# they belong.
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
    codec = _plain_codec(name, options)
    if options.schema_registry_url is None:
        return codec
    return _with_avro(codec, options)


def _plain_codec(name: str, options: FormatOptions) -> Codec:
    if name == "auto":
        return AutoCodec([f.build(options) for f in FORMATS])
    for f in FORMATS:
        if name == f.name or name in f.aliases:
            return f.build(options)
    raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMAT_NAMES)}")


# The formats whose records Kafka Connect's AvroConverter writes (docs/formats.md).
_AVRO_ENVELOPES = {"auto": ("debezium-flat", "debezium"), "debezium": ("debezium",)}
_AVRO_ENVELOPES["debezium-flat"] = _AVRO_ENVELOPES["flat"] = ("debezium-flat",)


def _with_avro(codec: Codec, options: FormatOptions) -> Codec:
    """`codec` reading Confluent-framed Avro values too (--schema-registry-url)."""
    from hydrator.formats.avro import AvroCodec
    from hydrator.formats.registry import SchemaRegistry

    envelopes = _AVRO_ENVELOPES.get(codec.name if codec.name != "auto" else "auto")
    if envelopes is None:
        raise FormatOptionError(
            "--schema-registry-url",
            "Avro is read for --format auto, debezium and debezium-flat, not " + codec.name,
        )
    registry = SchemaRegistry(
        options.schema_registry_url or "",
        dict(options.schema_registry_config),
        options.schema_registry_wait_s,
    )
    built = [_plain_codec(name, options) for name in envelopes]
    return AvroCodec(codec, built, registry, PlaceholderForms(options.placeholder_bytes))  # type: ignore[arg-type]


__all__ = ["FORMATS", "FORMAT_NAMES", "Format", "FormatOptionError", "FormatOptions", "codec_for"]
