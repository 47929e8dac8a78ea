"""`hydrator config show`: the configuration `hydrator run` would use, and where each value came
from."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from hydrator.cli.help import HydratorGroup, sectioned
from hydrator.cli.options import RUN_SECTIONS
from hydrator.cli.run_command import run, settings_from
from hydrator.cli.run_settings import RunOptions
from hydrator.config import default_workers
from hydrator.ops.config_show import CONFIG_FILE_META, effective_settings, render, source_of


@click.group(
    "config",
    cls=HydratorGroup,
    short_help="Print the configuration a run would use, and from where.",
)
def config_group() -> None:
    """The effective configuration: `config show` takes run's options and prints what a run
    would use, and where each value came from."""


@config_group.command("show", cls=sectioned(RUN_SECTIONS), params=list(run.params))
@click.pass_context
def config_show(ctx: click.Context, **options: Any) -> None:
    """Print the configuration `hydrator run` would use with the same options, and where each
    value came from (flag, env, file, default). Secrets show as ***. Exit 2 as `run` would."""
    config = settings_from(RunOptions(**options)).config
    # The default worker count is settled when the run starts: one per CPU, at most the input's
    # partitions. Shown unset, it reads back as the same default.
    settings = effective_settings(ctx, options, {"input_topics": config.input_topics})
    if options["workers"] is None:
        settled = f"default: one per CPU ({default_workers()}), at most the input's partitions"
        settings = [replace(s, source=settled) if s.name == "workers" else s for s in settings]
    config_path = ctx.meta.get(CONFIG_FILE_META)
    config_param = next(p for p in ctx.command.params if p.name == "config")
    click.echo(render(settings, config_path, source_of(ctx, config_param)), nl=False)
