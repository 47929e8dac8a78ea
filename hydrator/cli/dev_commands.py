"""The dev loop's commands: `hydrator dev broker`, `hydrator dev capture`, `hydrator tail`.

Thin shells over hydrator.dev.broker, .capture and .tail: parse the options, print, turn a
stop signal into exit 0 and a known failure into one line on stderr and exit 1.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import click
from click.core import ParameterSource
from confluent_kafka import KafkaException

from hydrator.cli.help import HydratorGroup
from hydrator.cli.params import PORT, bootstrap_servers_option, from_beginning_option
from hydrator.dev import broker as dev_broker
from hydrator.dev import capture as dev_capture
from hydrator.dev.broker import NoBroker, require_broker
from hydrator.dev.render import render
from hydrator.dev.signals import stop_on_signals
from hydrator.dev.tail import TailOptions, TopicMissing, records
from hydrator.errors import HydratorError
from hydrator.kafka.apache_kafka import NotAKafkaDistribution, check_distribution

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
KAFKA_HOME_VARIABLE = "HYDRATOR_KAFKA_HOME"


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


@click.group(
    "dev", cls=HydratorGroup, short_help="A local broker, and Debezium on your own Postgres table."
)
def dev() -> None:
    """A local dev loop: a broker that stays up, and Debezium on your own Postgres table."""


@dev.command("broker")
@click.option(
    "--port",
    type=PORT,
    default=9092,
    help="Port on 127.0.0.1; 0 picks a free one.",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the broker's own log here (default: discarded; Apache Kafka: in its directory).",
)
@click.option(
    "--kafka-home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=KAFKA_HOME_VARIABLE,
    help="Run Apache Kafka from this unpacked binary distribution (bin/, config/, libs/; needs "
    f"Java 17) instead of Tansu. Also ${KAFKA_HOME_VARIABLE}.",
)
@click.pass_context
def broker(ctx: click.Context, port: int, log_file: Path | None, kafka_home: Path | None) -> None:
    """Run a local Kafka-compatible broker until Ctrl-C: Tansu (the one `hydrator demo` uses),
    or Apache Kafka from a distribution with --kafka-home.

    Either keeps topics only while it runs: they are gone when it stops."""
    if kafka_home is not None:
        source = ctx.get_parameter_source("kafka_home")
        named_by = KAFKA_HOME_VARIABLE if source is ParameterSource.ENVIRONMENT else "--kafka-home"
        try:
            kafka_home = check_distribution(kafka_home, named_by)
        except NotAKafkaDistribution as exc:
            raise click.UsageError(str(exc)) from None
    try:
        dev_broker.serve(port or None, lambda line: click.echo(line), log_file, kafka_home)
    except (dev_broker.BrokerStopped, HydratorError, RuntimeError) as exc:
        _fail(str(exc))


class _TableName(click.ParamType):
    name = "schema.table"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> dev_capture.TableName:
        if isinstance(value, dev_capture.TableName):
            return value
        try:
            return dev_capture.TableName.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@dev.command("capture")
@click.option(
    "--dsn",
    required=True,
    help="libpq connection string or URL, e.g. 'host=127.0.0.1 user=postgres dbname=app'.",
)
@click.option("--table", required=True, type=_TableName(), help="The table to capture.")
@bootstrap_servers_option(DEFAULT_BOOTSTRAP, envvar=None)
@click.option(
    "--topic-prefix",
    default="dev",
    help="Debezium's topic.prefix: records go to <prefix>.<schema>.<table>.",
)
@click.option(
    "--envelope",
    type=click.Choice(sorted(dev_capture.ENVELOPES)),
    default="json",
    help="json: Debezium's envelope through Kafka Connect's JsonConverter.",
)
@click.option(
    "--schemas/--no-schemas",
    default=False,
    help="JsonConverter's schemas.enable: wrap each key and value in schema/payload.",
)
@click.option(
    "--snapshot/--no-snapshot",
    default=True,
    help="Read the table's rows first (Debezium's snapshot.mode initial), then stream changes.",
)
@click.option(
    "--partitions",
    type=click.IntRange(1, 64),
    default=1,
    help="Partitions of the topic, when it is created.",
)
@click.option(
    "--every",
    type=click.IntRange(1),
    default=100,
    help="Print the count each time this many more records are written.",
)
def capture(
    dsn: str,
    table: dev_capture.TableName,
    bootstrap_servers: str,
    topic_prefix: str,
    envelope: str,
    schemas: bool,
    snapshot: bool,
    partitions: int,
    every: int,
) -> None:
    """Capture one Postgres table with real Debezium into the broker, until Ctrl-C.

    Needs Java 17 and the `dev` extra (pip install 'toast-hydrator[dev]'); the table needs a
    primary key and the server wal_level=logical. Nothing stays behind in the database."""
    options = dev_capture.CaptureOptions(
        dsn=dsn,
        table=table,
        bootstrap_servers=bootstrap_servers,
        topic_prefix=topic_prefix,
        envelope=envelope,
        schemas=schemas,
        snapshot=snapshot,
        partitions=partitions,
        every=every,
    )
    try:
        dev_capture.run(options, lambda line: click.echo(line))
    except (dev_capture.CaptureUnavailable, dev_capture.CaptureFailed, NoBroker) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        # Ctrl-C before Debezium ran (while checking or starting Java): nothing to clean up
        sys.exit(130)


@click.command("tail", short_help="Show a topic's records: key, headers, abbreviated values.")
@click.argument("topic")
@bootstrap_servers_option(DEFAULT_BOOTSTRAP, envvar=None)
@from_beginning_option(
    "Start at the first record, or show only records written from now on (and follow)."
)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep reading new records until Ctrl-C (without it, stop at the end).",
)
@click.option("--max", "max_records", type=click.IntRange(1), help="Stop after this many.")
@click.option(
    "--dlq",
    is_flag=True,
    help="Read a dead-letter topic: each record's reason (hydrator.error) and source first.",
)
@click.option("--full", is_flag=True, help="Show long values whole instead of abbreviated.")
def tail(
    topic: str,
    bootstrap_servers: str,
    from_beginning: bool,
    follow: bool,
    max_records: int | None,
    dlq: bool,
    full: bool,
) -> None:
    """Show the records of TOPIC (committed ones only): key, headers (hydrator.* first) and the
    value, long strings and arrays abbreviated with their length. Stops at the end, or after
    --max records; with --follow or --from-end, waits for new ones until Ctrl-C."""
    options = TailOptions(bootstrap_servers, topic, from_beginning, follow, max_records)
    try:
        require_broker(bootstrap_servers)
    except NoBroker as exc:
        _fail(str(exc))
    stop = threading.Event()
    shown = 0
    with stop_on_signals(stop):
        try:
            for record in records(options, stop.is_set):
                if shown:
                    click.echo("")
                click.echo("\n".join(render(record, dlq=dlq, full=full)))
                shown += 1
        except TopicMissing as exc:
            _fail(f"{exc} on {bootstrap_servers}{exc.meant}")
        except KafkaException as exc:
            _fail(f"reading {topic} from {bootstrap_servers}: {exc.args[0].str()}")
        except TimeoutError as exc:
            _fail(f"reading {topic} from {bootstrap_servers}: {exc}")
    click.echo(f"({shown} record{'' if shown == 1 else 's'})", err=True)
