"""`hydrator dlq replay`: hydrate an application's dead letters again, through the same rules,
state and transactions as its run (docs/operations.md, "Replaying dead letters"). It takes
`run`'s options (the same application id, topics, format and state directory) and the filters
below; the replay itself is the embedded engine's (hydrator/engines/embedded/dlq_replay.py).

Exit codes as `run`'s: 0 the dead-letter topic is drained (up to its end at the start), 2 bad
usage (a filter, the Spark engine, an application that is running or has no dead-letter topic),
65 the replay dead-lettered again more than --max-dlq-ratio of what it replayed, 75 temporary.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from hydrator.cli import launch
from hydrator.cli.help import HydratorGroup, sectioned
from hydrator.cli.options import RUN_SECTIONS
from hydrator.cli.params import env_option
from hydrator.cli.run_command import run, usage_errors
from hydrator.cli.run_settings import RunOptions, build_config, build_embedded_settings
from hydrator.config import RunConfig, split_values
from hydrator.dlq.selection import OffsetRange, Selection, parse_moment
from hydrator.names import did_you_mean
from hydrator.ops import logs

REPLAY_SECTIONS = (
    ("Which dead letters", ("source_topics", "error_kinds", "since", "until", "source_offsets")),
    ("Replay", ("dry_run",)),
    *RUN_SECTIONS,
)

SPARK_REFUSED = (
    "--engine spark: a replay hydrates dead letters against the application's state, and the "
    "Spark engine keeps that state in its query's checkpoint, which only the query reads. For an "
    "application the embedded engine runs, replay with --engine embedded (the default). For a "
    "Spark application, produce the dead letters back to its input topic, where the running "
    'query hydrates them (docs/operations.md, "Replaying dead letters")'
)


class OffsetRangeType(click.ParamType):
    name = "[partition:]from-to"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, OffsetRange):
            return value
        try:
            return OffsetRange.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Moment(click.ParamType):
    """A time (ISO 8601) or a duration before now -> ms since the epoch."""

    name = "time|duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        try:
            return parse_moment(str(value), int(time.time() * 1000))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@click.group("dlq", cls=HydratorGroup, short_help="Replay an application's dead letters.")
def dlq_group() -> None:
    """An application's dead-letter topic (<application-id>-dlq): replay what is in it."""


@dlq_group.command(
    "replay",
    cls=sectioned(REPLAY_SECTIONS),
    params=list(run.params),
    short_help="Hydrate an application's dead letters again (after fixing the cause).",
    epilog="Give the options of the application's run (the same --application-id, topics, "
    "--format, --state-dir and -X); stop the run first. --available-now and --workers have no "
    "effect: a replay runs in one process and ends when the dead-letter topic is drained. Exit "
    "codes as run's: 0 done, 2 usage (also: the application is running), 65 too many dead "
    "letters again. In full: docs/operations.md.",
)
@env_option(
    "--source-topic",
    "source_topics",
    multiple=True,
    help="Only dead letters of this input topic; repeat for several (default: every "
    "--input-topic).",
)
@env_option(
    "--error-kind",
    "error_kinds",
    multiple=True,
    metavar="TEXT",
    help="Only dead letters whose hydrator.error starts with TEXT (a kind --dry-run lists, "
    "e.g. 'cockroachdb: InvalidKey'); repeat for several.",
)
@env_option(
    "--since",
    type=Moment(),
    default=None,
    help="Only dead letters written at or after this time (2026-05-01T10:00:00Z; UTC unless "
    "an offset is given) or this long ago (2h).",
)
@env_option(
    "--until",
    type=Moment(),
    default=None,
    help="Only dead letters written before this time, or this long ago.",
)
@env_option(
    "--source-offsets",
    "source_offsets",
    type=OffsetRangeType(),
    multiple=True,
    help="Only dead letters whose source record (hydrator.source) lies in this offset range, "
    "of one partition (3:100-200) or all (100-200, 100-, -200); repeat for several.",
)
@env_option(
    "--dry-run",
    is_flag=True,
    help="Count what would be replayed, left for later or passed over, by source topic and "
    "error kind; write nothing.",
)
def replay(**options: Any) -> None:
    """Hydrate an application's dead letters again, after the cause is fixed (a wrong --format,
    say): each through the same rules and state as the run, in its original order per key,
    its output keeping the original hydrator.source and partition, exactly once. Reads the
    dead-letter topic from where the last replay stopped to its end at the start; dead letters
    the filters leave out are copied to its end for a later replay, and one that fails again is
    dead-lettered again, never replayed twice by one replay."""
    dry_run = options.pop("dry_run")
    filters = {name: options.pop(name) for name in ("source_topics", "error_kinds")}
    moments = {name: options.pop(name) for name in ("since", "until")}
    offsets = options.pop("source_offsets")
    run_options = RunOptions(**options)
    with usage_errors():
        config = build_config(run_options)
    if run_options.engine == "spark":
        raise click.UsageError(SPARK_REFUSED)
    with usage_errors():
        embedded = build_embedded_settings(run_options)
    selection = Selection(
        _source_topics(filters["source_topics"], config),
        tuple(filters["error_kinds"]),
        moments["since"],
        moments["until"],
        tuple(offsets),
    )
    secrets = launch.run_secrets(config, embedded)
    logs.configure(config.log_level, config.log_format, config.application_id, secrets)
    if dry_run:
        sys.exit(launch.dry_run_replay(config, embedded, selection))
    sys.exit(launch.run_replay(config, embedded, selection))


def _source_topics(topics: tuple[str, ...], config: RunConfig) -> frozenset[str]:
    """--source-topic's topics, each one of the run's --input-topic."""
    chosen = split_values(topics)
    for topic in chosen:
        if topic not in config.input_topics:
            meant = did_you_mean(topic, config.input_topics)
            raise click.BadParameter(
                f"{topic} is not one of --input-topic ({', '.join(config.input_topics)}){meant}",
                param_hint="'--source-topic'",
            )
    return frozenset(chosen)
