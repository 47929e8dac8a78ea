"""`hydrator run ...`, `hydrator config show`, `hydrator state inspect|stats`, `hydrator demo`,
`hydrator dev broker|capture`, `hydrator tail` and `hydrator dlq replay` (the CLI the README
documents).

Every option also reads `HYDRATOR_<NAME>` (e.g. HYDRATOR_INPUT_TOPIC, several values separated by
spaces or commas) and the TOML file given by `--config` / HYDRATOR_CONFIG; the command line wins
over the environment, which wins over the file. A `HYDRATOR_*` variable no option reads is named
in a warning. Exit codes, by the kind of error (hydrator/errors.py): 0 done, 2 bad usage or
configuration (the message names the option, and the variable or file a bad value came from),
1 a fatal error while running, 75 a temporary failure (embedded: no broker within
--startup-timeout, a Kafka call blocked past its timeout, a schema registry silent past
--schema-registry-timeout) or a failure of the local state store:
start it again, 130 interrupted (a second stop signal, or a stop the blocked engine could not
honour in time). With --workers N > 1 the run ends with the code of the worker that ended it
(hydrator/engines/embedded/workers.py says when a worker is started again instead).
"""

from __future__ import annotations

import os

import click

from hydrator import core_build
from hydrator.cli.config_command import config_group
from hydrator.cli.demo_command import demo
from hydrator.cli.dev_commands import dev, tail
from hydrator.cli.dlq_commands import dlq_group
from hydrator.cli.environment import read_variables, unknown_variables_warning
from hydrator.cli.help import HydratorGroup
from hydrator.cli.params import ENGINES, FORMATS, SHOW_DEFAULTS
from hydrator.cli.run_command import run
from hydrator.cli.state_commands import state_group

__all__ = ["ENGINES", "FORMATS", "cli", "main", "run"]


@click.group(cls=HydratorGroup, context_settings={**SHOW_DEFAULTS, "max_content_width": 100})
# The core compiled or interpreted (setup.py): same results, not the same speed: say which.
@click.version_option(
    package_name="toast-hydrator", message=f"%(prog)s, version %(version)s, core {core_build()}"
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Keep the last full row per primary key; fill what CDC events leave out."""
    # Before the command reads its options: a misspelled variable may be why one is missing.
    warning = unknown_variables_warning(os.environ, read_variables(ctx.command))
    if warning:
        click.echo(warning, err=True)


cli.add_command(run)
cli.add_command(config_group)
cli.add_command(demo)
cli.add_command(state_group)
cli.add_command(dev)
cli.add_command(tail)
cli.add_command(dlq_group)


def main() -> None:
    cli(prog_name="hydrator")
