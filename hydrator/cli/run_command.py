"""`hydrator run`: hydrate the input topics into the output topic(s)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import click
from click.core import ParameterSource

from hydrator.cli import launch
from hydrator.cli.help import sectioned
from hydrator.cli.options import RUN_SECTIONS, run_options
from hydrator.cli.run_settings import RunOptions, build_settings
from hydrator.config import ConfigError, RunSettings, SparkSettings
from hydrator.ops import logs


@click.command(
    cls=sectioned(RUN_SECTIONS),
    short_help="Hydrate the input topics into the output topic(s).",
    epilog="Every option also reads HYDRATOR_<NAME> (HYDRATOR_STATE_DIR...) and the --config "
    "file. Exit codes: 0 done, 1 fatal, 2 usage or configuration, 65 too many dead letters "
    "(--available-now), 75 temporary (no broker...), 130 stopped without committing. In full: "
    "docs/operations.md.",
)
@run_options
def run(**options: Any) -> None:
    """Hydrate the input topics into the output topic(s): each event leaves with its full
    row, in the same envelope, key, partition and headers."""
    settings = settings_from(RunOptions(**options))
    config, engine = settings.config, settings.engine
    secrets = launch.run_secrets(config, engine)
    logs.configure(config.log_level, config.log_format, config.application_id, secrets)
    launch.warn_ignored(settings.ignored, settings.engine_name)
    if isinstance(engine, SparkSettings):
        sys.exit(launch.run_spark(config, engine))
    sys.exit(launch.run_embedded(config, engine))


def settings_from(options: RunOptions) -> RunSettings:
    """`run`'s options -> the run's settings; a bad value is a usage error (exit 2) naming the
    options."""
    with usage_errors():
        return build_settings(options, given_options())


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """A ConfigError raised inside is a usage error (exit 2) naming the options."""
    try:
        yield
    except ConfigError as exc:
        raise usage_error(exc) from None


def given_options() -> set[str]:
    """The names of the current command's options set by flag, environment or config file."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return set()
    return {
        param.name
        for param in ctx.command.params
        if param.name
        and ctx.get_parameter_source(param.name) not in (None, ParameterSource.DEFAULT)
    }


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
