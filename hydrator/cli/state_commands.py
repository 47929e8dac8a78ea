"""`hydrator state inspect|stats`: read an embedded engine's local state; `hydrator state
bootstrap` (bootstrap_command.py) fills it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hydrator.cli.bootstrap_command import bootstrap_command
from hydrator.cli.config_file import config_option, run_config_loader
from hydrator.cli.help import HydratorGroup
from hydrator.cli.params import (
    Command,
    application_id_option,
    engine_option,
    format_option,
    option,
    state_dir_option,
)
from hydrator.cli.run_command import run
from hydrator.errors import exit_code_for

if TYPE_CHECKING:
    from hydrator.ops.state_tools import TaskStore

# What the state tools take from a `--config` file written for `run`; its other keys are ignored.
_STATE_KEYS = ("engine", "state_dir", "application_id", "format_")


def _state_options(command: Command) -> Command:
    """The options every state tool takes: where the state is, and of which engine."""
    for add_option in (
        application_id_option(),
        state_dir_option(),
        engine_option(),
        config_option(
            run_config_loader(run.params, _STATE_KEYS),
            "The run's TOML file: its state-dir, application-id, engine and format are used.",
        ),
    ):
        command = add_option(command)
    return command


@click.group(
    "state", cls=HydratorGroup, short_help="Inspect, count or bootstrap an application's state."
)
def state_group() -> None:
    """Read an embedded engine's local state (read-only, also beside a running instance), or
    fill an application's state before it runs (bootstrap)."""


def _state_stores(engine: str, state_dir: Path, application_id: str) -> list[TaskStore]:
    from hydrator.ops.state_tools import holder_pid, task_stores

    if engine == "spark":
        raise click.UsageError(
            "the state tools read the embedded engine's stores; the Spark engine keeps its state "
            f"in Spark's state store, inside the checkpoint "
            f"({state_dir / application_id / 'checkpoint'}), which they do not read"
        )
    stores = task_stores(state_dir, application_id)
    pid = holder_pid(state_dir, application_id)
    if pid is not None:
        click.echo(
            f"note: process {pid} runs this application: shown is what it had written when "
            "the stores were opened",
            err=True,
        )
    return stores


def _state_tool(work: Callable[[], int]) -> None:
    from hydrator.ops.state_tools import StateToolError, StoreUnreadable

    try:
        code = work()
    except StateToolError as exc:
        raise click.UsageError(str(exc)) from None
    except StoreUnreadable as exc:
        click.echo(f"Error: {exc}", err=True)
        code = exit_code_for(exc)
    sys.exit(code)


@state_group.command("inspect")
@_state_options
@option("--input-topic", help="The key's input topic (default: every input topic the stores hold).")
@option("--key", "key_json", required=True, help="The primary key as JSON: '{\"id\": 1}'.")
@format_option("The run's --format: its codec names the key the state is stored under.")
@click.option(
    "--full-values",
    is_flag=True,
    help="Print every value of the image whole (default: longer strings are cut, marked with "
    "their length).",
)
def state_inspect(
    engine: str,
    state_dir: Path,
    application_id: str,
    input_topic: str | None,
    key_json: str,
    format_: str,
    full_values: bool,
) -> None:
    """Print a key's stored state: image, position, deleted, parked records, waiting handoffs,
    updated_at (on the task's processing clock). One JSON object per input topic holding the
    key; exit 1 when none does."""
    from hydrator.ops.state_tools import VALUE_CHARS, inspect_key, parse_key

    value_chars = None if full_values else VALUE_CHARS

    def work() -> int:
        key = parse_key(key_json, format_, input_topic)
        stores = _state_stores(engine, state_dir, application_id)
        found = inspect_key(stores, key, input_topic)
        for key_state in found:
            shown = key_state.to_dict(value_chars)
            click.echo(json.dumps(shown, indent=2, ensure_ascii=False, default=str))
        if not found:
            where = f"input topic {input_topic}" if input_topic else "any input topic"
            click.echo(f"no state for key {key} under {where} in {len(stores)} stores", err=True)
        return 0 if found else 1

    _state_tool(work)


@state_group.command("stats")
@_state_options
@option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
def state_stats(engine: str, state_dir: Path, application_id: str, as_json: bool) -> None:
    """Keys, bytes, tombstones, parked keys and records, waiting handoffs, per task store and in
    total."""
    from hydrator.ops.state_tools import all_stats, stats_table

    def work() -> int:
        per_store, totals = all_stats(_state_stores(engine, state_dir, application_id))
        if as_json:
            document = {"stores": [s.to_dict() for s in per_store], "totals": totals.to_dict()}
            click.echo(json.dumps(document, indent=2))
        else:
            click.echo(stats_table(per_store, totals))
        return 0

    _state_tool(work)


state_group.add_command(bootstrap_command)
