"""`hydrator config show`: the configuration `hydrator run` would use, and where each value came
from."""

from __future__ import annotations

from typing import Any

import click

from hydrator.cli.run_command import config_from, run, spark_options_from
from hydrator.ops.config_show import CONFIG_FILE_META, effective_settings, render, source_of


@click.group("config")
def config_group() -> None:
    """The effective configuration."""


@config_group.command("show", params=list(run.params))
@click.pass_context
def config_show(ctx: click.Context, **options: Any) -> None:
    """Print the configuration `hydrator run` would use with the same options, and where each
    value came from (flag, env, file, default). Secrets show as ***. Exit 2 as `run` would."""
    config = config_from(options)
    if config.engine == "spark":
        spark_options_from(options)
    settings = effective_settings(
        ctx, options, {"input_topics": config.input_topics, "workers": config.workers}
    )
    config_path = ctx.meta.get(CONFIG_FILE_META)
    config_param = next(p for p in ctx.command.params if p.name == "config")
    click.echo(render(settings, config_path, source_of(ctx, config_param)), nl=False)
