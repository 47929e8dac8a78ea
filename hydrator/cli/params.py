"""The kinds of value the CLI's options take, and the environment variable each option reads."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from hydrator.config import (
    ConfigError,
    check_application_id,
    is_uri,
    parse_duration_ms,
    parse_size_bytes,
)
from hydrator.formats import FORMAT_NAMES
from hydrator.kafka.client_config import split_env_properties
from hydrator.ops.config_show import source_of

ENGINES = ("spark", "embedded")
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


# `click.option`, for an option that names the source of a bad value.
option = functools.partial(click.option, cls=SourcedOption)


class Duration(click.ParamType):
    """`500ms`, `30s`, `2m`, `24h`, `7d` (a bare number is seconds) -> milliseconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ms(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Size(click.ParamType):
    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size_bytes(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


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
    the engine starts; the embedded engine refuses it in build_config)."""

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
