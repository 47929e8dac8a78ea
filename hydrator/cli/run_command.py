"""`hydrator run`: hydrate the input topics into the output topic(s)."""

from __future__ import annotations

import sys
from typing import Any

import click

from hydrator.cli import launch
from hydrator.cli.options import run_options
from hydrator.config import (
    ConfigError,
    RunConfig,
    SparkOptions,
    build_config,
    build_spark_options,
)
from hydrator.ops import logs


@click.command()
@run_options
def run(**options: Any) -> None:
    """Hydrate the input topics into the output topic(s)."""
    config = config_from(options)
    spark = spark_options_from(options) if config.engine == "spark" else None
    secrets = launch.run_secrets(config, spark)
    logs.configure(options["log_level"], options["log_format"], config.application_id, secrets)
    if spark is not None:
        sys.exit(launch.run_spark(config, spark))
    sys.exit(launch.run_embedded(config))


def config_from(options: dict[str, Any]) -> RunConfig:
    """`run`'s options -> RunConfig; a bad value is a usage error (exit 2) naming the options."""
    try:
        return build_config(options)
    except ConfigError as exc:
        raise usage_error(exc) from None


def spark_options_from(options: dict[str, Any]) -> SparkOptions:
    try:
        return build_spark_options(options)
    except ConfigError as exc:
        raise usage_error(exc) from None


def usage_error(exc: ConfigError) -> click.UsageError:
    """As click reports a bad option: `Invalid value for '-X' / '--kafka-property': ...`, with
    where the value came from when not the command line (params.SourcedOption)."""
    if not exc.options:
        return click.UsageError(str(exc))
    ctx = click.get_current_context(silent=True)
    named = exc.options[-1]
    for param in ctx.command.params if ctx else ():
        if named in param.opts:
            return click.BadParameter(str(exc), ctx, param)
    return click.BadParameter(str(exc), param_hint=" / ".join(f"'{o}'" for o in exc.options))
