"""The kinds of value the CLI's options take, the environment variable each option reads, and
the options several commands share (declared once here, so that each says the same everywhere)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from hydrator.config import (
    DEFAULT_APPLICATION_ID,
    ConfigError,
    check_application_id,
    default_state_dir,
    is_uri,
    parse_duration_ms,
    parse_size_bytes,
)
from hydrator.formats import FORMAT_NAMES
from hydrator.kafka.client_config import split_env_properties
from hydrator.ops.config_show import source_of

ENGINES = ("spark", "embedded")
PORT = click.IntRange(0, 65535)
FORMATS = FORMAT_NAMES  # grows as codecs are added to hydrator/formats


def env_name(name: str) -> str:
    """The environment variable an option reads: `state_dir` -> `HYDRATOR_STATE_DIR`."""
    return f"HYDRATOR_{name.upper().replace('-', '_')}"


class SourcedOption(click.Option):
    """An option whose errors say where a bad value came from when it was not the command line:
    `Invalid value for '--workers' (env HYDRATOR_WORKERS): ...`, `(file run.toml)`."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        hint = super().get_error_hint(ctx)
        if ctx is None or self.name is None:
            return hint
        source = ctx.get_parameter_source(self.name)
        if source in (ParameterSource.ENVIRONMENT, ParameterSource.DEFAULT_MAP):
            return f"{hint} ({source_of(ctx, self)})"
        return hint


# Every --help shows each option's default (set on the `hydrator` group and the live view).
SHOW_DEFAULTS = {"show_default": True}

# `click.option`, for an option that names the source of a bad value.
option = functools.partial(click.option, cls=SourcedOption)

Command = TypeVar("Command", bound=Callable[..., Any])
OptionDecorator = Callable[[Command], Command]


def env_option(*param_decls: str, **attrs: Any) -> OptionDecorator[Any]:
    """An option that also reads `HYDRATOR_<LONG NAME>` (`--state-dir`: HYDRATOR_STATE_DIR) and
    names the source of a bad value."""
    long_name = next(decl for decl in param_decls if decl.startswith("--"))
    attrs.setdefault("envvar", env_name(long_name.split("/")[0].removeprefix("--")))
    return option(*param_decls, **attrs)


class _Measure(click.ParamType):
    """A quantity spelled with its unit, as `parse` reads it; a number already parsed (a
    default) passes as it is."""

    parse: Callable[[str], int]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return type(self).parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Duration(_Measure):
    """`500ms`, `30s`, `2m`, `24h`, `7d` (a bare number is seconds) -> milliseconds."""

    name = "duration"
    parse = staticmethod(parse_duration_ms)


class Size(_Measure):
    """`2048`, `2KB`, `16MB` (binary multiples) -> bytes."""

    name = "size"
    parse = staticmethod(parse_size_bytes)


class SizeOrOff(Size):
    """A size, or `off` (also 0): the feature is disabled (0)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, str) and value.strip().lower() == "off":
            return 0
        return super().convert(value, param, ctx)


class ApplicationId(click.ParamType):
    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_application_id(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


class StateDir(click.ParamType):
    """A directory path, or a URI (for --engine spark: checked through Spark's filesystems when
    the engine starts; the embedded engine refuses it in build_embedded_settings)."""

    name = "dir|uri"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not is_uri(text) and Path(text).exists() and not Path(text).is_dir():
            self.fail(f"{text} is a file, not a directory", param, ctx)
        return text


class KafkaProperty(click.ParamType):
    """NAME=VALUE; checked later, all together, by parse_properties (which never shows values)."""

    name = "name=value"

    def split_envvar_value(self, rv: str) -> list[str]:
        return split_env_properties(rv)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)


# -- options several commands take, declared once ------------------------------------------------


def engine_option() -> OptionDecorator[Any]:
    return env_option(
        "--engine",
        type=click.Choice(ENGINES),
        default="embedded",
        help="embedded: this process (or --workers), RocksDB state, Kafka transactions, exactly "
        "once; spark: Spark Structured Streaming, state in its checkpoint, at least once.",
    )


def bootstrap_servers_option(default: str | None = None, **attrs: Any) -> OptionDecorator[Any]:
    """Required unless a `default` is given (the dev loop's local broker)."""
    if default is None:
        attrs["required"] = True
    else:
        attrs["default"] = default
    attrs.setdefault("help", "The Kafka brokers to start from.")
    return env_option("--bootstrap-servers", metavar="HOST:PORT[,...]", **attrs)


def application_id_option() -> OptionDecorator[Any]:
    return env_option(
        "--application-id",
        type=ApplicationId(),
        default=DEFAULT_APPLICATION_ID,
        help="Consumer group, prefix of the internal topics and state sub-directory.",
    )


def state_dir_option(help: str | None = None, uri: bool = False) -> OptionDecorator[Any]:
    """A local directory, or with `uri` also a URI (`run --engine spark`'s checkpoint). The
    default, the user's state directory, is read when the command runs (config.py)."""
    path_type = StateDir() if uri else click.Path(file_okay=False, path_type=Path)
    return env_option(
        "--state-dir",
        type=path_type,
        default=lambda: str(default_state_dir()),
        show_default=f"the user's state directory, {default_state_dir()}",
        help=help,
    )


def format_option(help: str | None = None, **attrs: Any) -> OptionDecorator[Any]:
    return env_option(
        "--format", "format_", type=click.Choice(FORMATS), default="auto", help=help, **attrs
    )


def from_beginning_option(help: str) -> OptionDecorator[Any]:
    return option("--from-beginning/--from-end", default=True, help=help)


def kafka_property_option() -> OptionDecorator[Any]:
    return env_option(
        "-X",
        "--kafka-property",
        "kafka_properties",
        type=KafkaProperty(),
        multiple=True,
        metavar="NAME=VALUE",
        help="librdkafka property for every client (consumer./producer./admin. prefix for one "
        "kind). Give secrets through HYDRATOR_KAFKA_PROPERTY or --config, not on the command line.",
    )


def startup_timeout_option(help: str) -> OptionDecorator[Any]:
    """How long to wait for a broker before giving up with exit 75: the same for `run` and
    `state bootstrap`, which wait alike (hydrator/kafka/reachability.py)."""
    return env_option("--startup-timeout", type=Duration(), default="5m", help=help)
