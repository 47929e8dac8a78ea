"""`hydrator state bootstrap`: fill an application's state from full rows (docs/cold-start.md).

Exit codes: 0 done; 2 bad usage, a --bootstrap-servers host that does not resolve, or the
application is running now (nothing is written); 75 no broker answered within --startup-timeout
(as `run`); 1 a failure on the way (Kafka, Postgres): state written so far is valid, and a rerun
completes it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hydrator.cli import params
from hydrator.cli.config_file import config_option, run_config_loader
from hydrator.cli.params import option
from hydrator.cli.run_command import run
from hydrator.errors import exit_code_for
from hydrator.formats import codec_for

# What the command takes from a `--config` file written for `run`; its other keys are ignored.
_FROM_RUN_CONFIG = (
    "bootstrap_servers", "application_id", "state_dir", "engine", "format_", "kafka_properties",
    "startup_timeout",
)  # fmt: skip


@click.command("bootstrap")
@config_option(
    run_config_loader(run.params, _FROM_RUN_CONFIG),
    "The run's TOML file: its bootstrap-servers, application-id, state-dir, engine, format, "
    "startup-timeout and Kafka properties are used.",
)
@params.bootstrap_servers_option()
@option("--input-topic", required=True, help="The run's input topic whose keys the state is for.")
@params.application_id_option()
@params.state_dir_option(
    "The run's state directory (the embedded engine's local stores catch up from the "
    "changelog at the run's next start)."
)
@params.engine_option()
@params.env_option(
    "--from-postgres",
    "dsn",
    help="The source database (libpq DSN or URI; a password is best given by PGPASSWORD or "
    "~/.pgpass). With --table.",
)
@option("--table", help="schema.table to read (with --from-postgres).")
@option(
    "--connector-config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The Debezium connector's settings (JSON object), for how its values are shipped: "
    "binary/decimal/hstore handling, time precision, key.converter.schemas.enable.",
)
@option("--from-topic", help="A topic of full rows (an earlier enriched topic, ...).")
@params.format_option("The format of --from-topic's records.")
@params.kafka_property_option()
@params.startup_timeout_option(
    "How long to wait for a broker at --bootstrap-servers before giving up with exit 75, as "
    "`run` does (a host name that does not resolve: exit 2 at once)."
)
@option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def bootstrap_command(
    bootstrap_servers: str,
    input_topic: str,
    application_id: str,
    state_dir: Path,
    engine: str,
    dsn: str | None,
    table: str | None,
    connector_config: Path | None,
    from_topic: str | None,
    format_: str,
    kafka_properties: tuple[str, ...],
    startup_timeout: int,
    as_json: bool,
) -> None:
    """Fill an application's state from full rows, so its first events are hydrated: from the
    source table in one snapshot (--from-postgres DSN --table schema.table), or from a topic of
    full rows (--from-topic T)."""
    from hydrator.bootstrap import run as bootstrap
    from hydrator.bootstrap.embedded import BootstrapRefused, EmbeddedState
    from hydrator.bootstrap.spark import SparkState
    from hydrator.kafka.client_config import ClientSettings, parse_properties
    from hydrator.kafka.partitioner import changefeed_partition, partition_for_key
    from hydrator.kafka.reachability import BrokerAddressUnknown, BrokerUnavailable

    if (dsn is None) == (from_topic is None):
        raise click.UsageError("give one of --from-postgres (with --table) or --from-topic")
    if dsn is not None and not table:
        raise click.UsageError("--from-postgres needs --table schema.table")
    connector: dict[str, str] = {}
    if connector_config is not None:
        from hydrator.demo.connector import ConnectorConfigError, read_settings

        try:
            connector = read_settings(connector_config)
        except ConnectorConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--connector-config") from None
    clients = ClientSettings(bootstrap_servers, parse_properties(kafka_properties))
    try:
        bootstrap.require_broker(clients, startup_timeout / 1000)
        bootstrap.refuse_if_running(clients, application_id)
        if engine == "embedded":
            _refuse_if_local_holder(state_dir, application_id)
        cockroach = from_topic is not None and format_ in ("cockroachdb", "cockroach")
        placement = changefeed_partition if cockroach else partition_for_key
        target: EmbeddedState | SparkState
        if engine == "spark":
            target = SparkState(clients, application_id, input_topic)
        else:
            target = EmbeddedState(clients, application_id, input_topic, placement)
        target.open()
        if dsn is not None:
            assert table is not None
            shape = bootstrap.learn_key_shape(clients, application_id, input_topic, connector)
            summary = bootstrap.from_postgres(target, dsn, table, connector, shape)
        else:
            assert from_topic is not None
            summary = bootstrap.from_topic(
                target, clients, application_id, from_topic, codec_for(format_)
            )
    except BootstrapRefused as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    except (BrokerUnavailable, BrokerAddressUnknown) as exc:  # nothing is written yet
        # the codes `run` ends with for the same failure: 75 no broker in time, 2 no such host
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exit_code_for(exc))
    except Exception as exc:  # Kafka, Postgres: what is written stays valid
        click.echo(
            f"Error: the bootstrap failed ({type(exc).__name__}: {_safe(exc, dsn)}); what it "
            "wrote is valid state, run it again to complete it",
            err=True,
        )
        sys.exit(1)
    click.echo(json.dumps(summary.to_json()) if as_json else summary.line())


def _refuse_if_local_holder(state_dir: Path, application_id: str) -> None:
    """An instance on this machine holds the application's state directory: it runs."""
    from hydrator.bootstrap.embedded import BootstrapRefused
    from hydrator.ops.state_tools import holder_pid

    pid = holder_pid(state_dir, application_id)
    if pid is not None:
        raise BootstrapRefused(
            f"--application-id {application_id}: process {pid} runs the application (it holds "
            f"{state_dir}); stop it before bootstrapping its state"
        )


def _safe(exc: BaseException, dsn: str | None) -> str:
    """The error's message without the DSN (it may hold a password)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text.replace(dsn, "<dsn>") if dsn else text
