"""`--config FILE`: a TOML file's values become the defaults of a command's options."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import click

from hydrator.cli.environment import ignoring_warning
from hydrator.cli.params import OptionDecorator, env_option
from hydrator.config import ConfigError, load_config_file
from hydrator.kafka.client_config import split_env_properties
from hydrator.names import did_you_mean
from hydrator.ops.config_show import CONFIG_FILE_META, long_name, shown_path

ConfigCallback = Callable[[click.Context, click.Parameter, str | None], Any]


def config_option(callback: ConfigCallback, help: str) -> OptionDecorator[Any]:
    """`--config FILE` (or HYDRATOR_CONFIG), read before every other option of the command."""
    return env_option(
        "--config",
        type=click.Path(dir_okay=False),
        callback=callback,
        is_eager=True,
        expose_value=False,
        help=help,
    )


def load_run_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Eager: the file's values become defaults for every other option of the command."""
    if not value:
        return value
    defaults = config_defaults(ctx, param, value, ctx.command.params)
    ctx.meta[CONFIG_FILE_META] = value
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def run_config_loader(run_params: list[click.Parameter], taken: Collection[str]) -> ConfigCallback:
    """For a command that reads a file written for `run` (checked as `run` checks it): the
    values of its own options named in `taken` become their defaults; the rest is ignored."""

    def load(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if not value:
            return
        defaults = config_defaults(ctx, param, value, run_params)
        own = {p.name for p in ctx.command.params}
        picked = {name: v for name, v in defaults.items() if name in taken and name in own}
        ctx.default_map = {**(ctx.default_map or {}), **picked}

    return load


def config_defaults(
    ctx: click.Context, param: click.Parameter, path: str, params: list[click.Parameter]
) -> dict[str, Any]:
    """The file's values by parameter name. Keys that are none of `params` (a table other than
    `[run]` among them) are named in one warning on stderr and left out."""
    try:
        values = load_config_file(Path(path))
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    # Keys are long option names (input-topic), which is not always the parameter's name
    # (input_topics).
    by_option = {
        opt.lstrip("-").replace("-", "_"): p
        for p in params
        if isinstance(p, click.Option) and p.name != "config"
        for opt in p.opts
        if opt.startswith("--")
    }
    if unknown := [name for name in values if name not in by_option]:
        options = {long_name(p) for p in by_option.values()}
        click.echo(
            ignoring_warning(
                [_unknown_key(name, values[name], options) for name in unknown],
                f" in {shown_path(path)}",
            ),
            err=True,
        )
    defaults: dict[str, Any] = {}
    for name, setting in values.items():
        option = by_option.get(name)
        if option is None:
            continue
        if option.name in _PROPERTY_LISTS and isinstance(setting, str):
            setting = split_env_properties(setting)  # one string: a property per line
        elif option.multiple and isinstance(setting, str):
            setting = [setting]  # `input-topic = "orders"`: a list of one
        defaults[str(option.name)] = setting
    return defaults


def _unknown_key(name: str, value: Any, options: set[str]) -> str:
    """`handof-timeout (did you mean handoff-timeout?)`; a table as `[spark]`."""
    spelled = name.replace("_", "-")
    if isinstance(value, dict):
        return f"[{spelled}]" + did_you_mean(f"[{spelled}]", ["[run]"])
    return spelled + did_you_mean(spelled, options)


# options whose config-file value may be one string holding a property per line
_PROPERTY_LISTS = frozenset({"kafka_properties", "schema_registry_properties"})
