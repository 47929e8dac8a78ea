"""Starting an engine for `hydrator run` (and `hydrator dlq replay`), and the exit code for how
it ended."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import click

from hydrator.config import EmbeddedSettings, RunConfig, SparkSettings
from hydrator.core.settings import UnresolvedColumnsError
from hydrator.errors import ConfigurationError, StorageError, TemporaryFailure, exit_code_for
from hydrator.ops import logs
from hydrator.secrets import redact, secret_values

if TYPE_CHECKING:
    from hydrator.dlq.selection import Selection
    from hydrator.engines.embedded.workers import Worker
    from hydrator.metrics.run import Health, RunMetrics

log = logging.getLogger("hydrator")


def run_secrets(config: RunConfig, engine: EmbeddedSettings | SparkSettings) -> set[str]:
    """The values no line may show: secret `-X`/`--spark-conf` values and URL passwords."""
    spark = engine if isinstance(engine, SparkSettings) else None
    registry = dict(config.format_options.schema_registry_config)
    settings = {**config.kafka.properties, **(spark.conf if spark else {}), **registry}
    texts = [config.kafka.bootstrap_servers, str(engine.state_dir), spark.master if spark else ""]
    texts.append(config.format_options.schema_registry_url or "")
    found = secret_values(settings, texts)
    if config.reselect is not None:  # the --reselect DSN's password
        found |= config.reselect.secrets()
    return found


def run_embedded(config: RunConfig, embedded: EmbeddedSettings) -> int:
    """The embedded engine: in this process, or in `embedded.workers` worker processes that
    this one supervises."""
    if embedded.workers == 1:
        return _run_engine(config, embedded)
    from hydrator.engines.embedded.workers import Supervisor

    return _guarded(Supervisor(config, embedded, run_worker).run, run_secrets(config, embedded))


def run_worker(config: RunConfig, embedded: EmbeddedSettings, worker: Worker) -> int:
    """A worker process of a run with several (its entry point, in the worker's process)."""
    logs.configure(
        config.log_level,
        config.log_format,
        config.application_id,
        run_secrets(config, embedded),
        worker.index,
    )
    return _run_engine(config, embedded, worker)


def run_replay(config: RunConfig, embedded: EmbeddedSettings, selection: Selection) -> int:
    """`hydrator dlq replay`: the embedded engine in this process, reading the application's
    dead-letter topic."""
    return _run_engine(config, embedded, replay=selection)


def dry_run_replay(config: RunConfig, embedded: EmbeddedSettings, selection: Selection) -> int:
    """`hydrator dlq replay --dry-run`: what a replay would do, printed; nothing written."""
    from hydrator.dlq.dry_run import dry_run
    from hydrator.dlq.topic import dead_letter_partitions
    from hydrator.kafka.reachability import wait_for_broker

    def count() -> None:
        from confluent_kafka.admin import AdminClient

        clients = config.kafka
        wait_for_broker(clients.admin(), embedded.startup_timeout_ms / 1000, lambda: False)
        partitions = dead_letter_partitions(AdminClient(clients.admin()), config.application_id)
        found = dry_run(
            clients.consumer(), config.application_id, config.input_topics, partitions, selection
        )
        click.echo(found.render(), nl=False)

    return _guarded(count, run_secrets(config, embedded))


def _run_engine(
    config: RunConfig,
    embedded: EmbeddedSettings,
    worker: Worker | None = None,
    replay: Selection | None = None,
) -> int:
    """The embedded engine in this process: the whole run, one worker of it, or a replay."""
    from hydrator.engines.embedded.engine import EmbeddedEngine

    engine = EmbeddedEngine(config, embedded, worker=worker, replay=replay)
    if worker is not None and config.metrics_port is not None:
        run = _serving_worker_metrics(worker, engine.metrics.run, engine.metrics, engine.run)
    else:
        run = _serving_metrics(config, engine.metrics.run, engine.metrics, engine.run)
    secrets = run_secrets(config, embedded)
    code = _guarded(run, secrets, worker.tell_error if worker else _echo_error)
    if engine.in_group:
        _exit_in_group(code)
    return code


def _exit_in_group(code: int) -> NoReturn:
    """End the process now, the engine's consumer still open: the group drops the member when
    its session expires (hydrator/engines/embedded/engine.py says why). A normal exit would
    close the consumer, which sends a LeaveGroup."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _serving_metrics(
    config: RunConfig, metrics: RunMetrics, health: Health, run: Callable[[], None]
) -> Callable[[], None]:
    """`run`, with /metrics, /healthz and /readyz served meanwhile on --metrics-host and
    --metrics-port (no port: not served), from before the engine waits for a broker, so /healthz
    answers during start-up."""
    from hydrator.metrics.exporter import serving

    def serve_and_run() -> None:
        with serving(config.metrics_port, metrics, health, config.metrics_host):
            run()

    return serve_and_run


def _serving_worker_metrics(
    worker: Worker, metrics: RunMetrics, health: Health, run: Callable[[], None]
) -> Callable[[], None]:
    """`run`, with this worker's /metrics, /healthz and /readyz served on a free loopback port
    for the supervisor, which serves --metrics-port with every worker's (metrics/merged.py)."""
    from hydrator.metrics.exporter import MetricsServer, registry_for

    def serve_and_run() -> None:
        server = MetricsServer(0, registry_for(metrics), health, loopback=True)
        server.start()
        worker.serve_metrics(server.port)
        try:
            run()
        finally:
            server.close()

    return serve_and_run


def _echo_error(line: str) -> None:
    click.echo(line, err=True)


def _guarded(
    run: Callable[[], int | None],
    secrets: set[str],
    tell_error: Callable[[str], None] = _echo_error,
) -> int:
    """Run an engine; the exit code for how it ended (or the one `run` returns), by the kind of
    error that ended it (hydrator/errors.py). `tell_error` prints the one line of an error that
    is not a crash (a worker hands it to its supervisor, which prints it last)."""
    try:
        code = run()
    except KeyboardInterrupt as exc:
        return exit_code_for(exc)
    except UnresolvedColumnsError as exc:  # --on-unresolved fail
        log.error("stopping without committing the batch: %s", exc)
        return exit_code_for(exc)
    except (ConfigurationError, TemporaryFailure, StorageError) as exc:
        # Not a crash: one line says what to change, or that a supervisor should try again.
        tell_error(redact(f"Error: {exc}", secrets))
        return exit_code_for(exc)
    except Exception as exc:
        log.exception("fatal: %s", exc)
        return exit_code_for(exc)
    return code or 0


def warn_ignored(names: tuple[str, ...] | list[str], engine: str) -> None:
    """A warning per run option given that `engine` does not use (never silently ignored)."""
    other = "embedded" if engine == "spark" else "spark"
    for name in names:
        flag = "--" + name.replace("_", "-")
        log.warning(
            "%s is ignored under --engine %s: only the %s engine uses it", flag, engine, other
        )


def run_spark(config: RunConfig, spark: SparkSettings) -> int:
    # Imported here: the embedded engine and the demo must not pay for (or need) pyspark.
    from hydrator.engines.spark.engine import SparkEngine

    engine = SparkEngine(config, spark)
    run = _serving_metrics(config, engine.metrics.run, engine.metrics, engine.run)
    return _guarded(run, run_secrets(config, spark))
