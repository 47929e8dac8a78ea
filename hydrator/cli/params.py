"""The kinds of value the CLI's options take, and the environment variable each option reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hydrator.config import (
    DEFAULT_APPLICATION_ID,
    ConfigError,
    check_application_id,
    is_uri,
    parse_duration_ms,
    parse_size_bytes,
)
from hydrator.formats import FORMAT_NAMES
from hydrator.kafka.client_config import split_env_properties

ENGINES = ("spark", "embedded")
FORMATS = FORMAT_NAMES  # grows as codecs are added to hydrator/formats


def env_name(name: str) -> str:
    """The environment variable an option reads: `state_dir` -> `HYDRATOR_STATE_DIR`."""
    return f"HYDRATOR_{name.upper().replace('-', '_')}"


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


# -- options several commands take, declared once --------------------------------------------


def engine_option() -> Any:
    return click.option(
        "--engine",
        type=click.Choice(ENGINES),
        default="embedded",
        show_default=True,
        envvar=env_name("engine"),
    )


def application_id_option(help: str | None = None) -> Any:
    return click.option(
        "--application-id",
        type=ApplicationId(),
        default=DEFAULT_APPLICATION_ID,
        show_default=True,
        envvar=env_name("application_id"),
        help=help,
    )


def local_state_dir_option(help: str | None = None) -> Any:
    """`--state-dir` of the state tools: a local directory (`run` takes a URI too)."""
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("hydrator-state"),
        show_default=True,
        envvar=env_name("state_dir"),
        help=help,
    )


def format_option(help: str | None = None) -> Any:
    return click.option(
        "--format",
        "format_",
        type=click.Choice(FORMATS),
        default="auto",
        show_default=True,
        envvar=env_name("format"),
        help=help,
    )


def kafka_property_option(help: str) -> Any:
    return click.option(
        "-X",
        "--kafka-property",
        "kafka_properties",
        type=KafkaProperty(),
        multiple=True,
        metavar="NAME=VALUE",
        envvar=env_name("kafka_property"),
        help=help,
    )
