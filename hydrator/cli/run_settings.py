"""`hydrator run`'s option values -> the run's settings, built once, one typed value per concern:
what every engine uses (RunConfig, with its Kafka clients' settings, hydration rules, format and
--reselect) and what only the chosen engine uses (EmbeddedSettings or SparkSettings). Options are
read by attribute and settings built by keyword, so that a misspelt or misrouted option is a
type error rather than a KeyError or a setting no engine reads. A bad value, or options that do
not go together, raise ConfigError naming the options."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from hydrator.config import (
    SPARK_TRIGGER_INTERVAL_MS,
    ConfigError,
    EmbeddedSettings,
    RunConfig,
    RunSettings,
    SparkSettings,
    default_workers,
    local_state_dir,
    parse_spark_conf,
    split_values,
)
from hydrator.core.settings import HydrationSettings, OnStale, OnUnresolved
from hydrator.formats.options import FormatOptions
from hydrator.kafka.client_config import ClientConfigError, ClientSettings, parse_properties
from hydrator.reselect.settings import DEFAULT_STATEMENT_TIMEOUT_MS, ReselectSettings
from hydrator.topology.layout import internal_topic_clash

# Run options only the embedded engine uses, by parameter name ...
EMBEDDED_ONLY = ("workers", "backlog_commit_interval", "state_cache_bytes", "startup_timeout")
# ... and those only the Spark engine uses.
SPARK_ONLY = ("master", "spark_conf", "spark_kafka_io", "max_offsets_per_trigger")


@dataclass(frozen=True)
class RunOptions:
    """The values of `run`'s options as click parsed them, by parameter name (options.py):
    durations in ms, sizes in bytes, repeated options as tuples. `config show` and `dlq replay`
    take the same options."""

    # Input and output
    engine: str
    input_topics: tuple[str, ...]
    output_topic: str | None
    output_suffix: str | None
    application_id: str
    available_now: bool
    max_dlq_ratio: float
    # Kafka
    bootstrap_servers: str
    kafka_properties: tuple[str, ...]
    startup_timeout: int
    commit_interval: int
    backlog_commit_interval: int
    max_record_bytes: int
    # Format
    format_: str
    placeholder: str
    fill_absent: bool
    schema_registry_url: str | None
    schema_registry_properties: tuple[str, ...]
    schema_registry_timeout: int
    # Hydration rules
    fill_before: bool
    on_stale: str
    on_unresolved: str
    changed_header: bool
    tombstone_retention: int
    handoff_timeout: int
    state_ttl: int | None
    max_parked_records: int
    max_parked_bytes: int
    # State
    state_dir: str
    state_cache_bytes: int
    large_value_threshold: int
    large_value_compression: str
    # Re-select
    reselect: str | None
    reselect_max_qps: float | None
    reselect_timeout: int
    # Spark engine
    master: str
    spark_conf: tuple[str, ...]
    spark_kafka_io: str
    max_offsets_per_trigger: int | None
    # Operations
    workers: int | None
    progress_interval: int
    metrics_port: int | None
    metrics_host: str
    log_level: str
    log_format: str


def build_settings(options: RunOptions, given: Collection[str] = ()) -> RunSettings:
    """The run's settings; `given`: the names of the options set (not defaults), for the
    options the chosen engine does not use, and Spark's trigger."""
    config = build_config(options)
    if options.engine == "spark":
        ignored = tuple(name for name in EMBEDDED_ONLY if name in given)
        return RunSettings(config, build_spark_settings(options, given), ignored)
    ignored = tuple(name for name in SPARK_ONLY if name in given)
    return RunSettings(config, build_embedded_settings(options), ignored)


def build_config(options: RunOptions) -> RunConfig:
    """What every engine uses. The checks run in the order the options' errors are told."""
    output_topic, output_suffix = _outputs(options)
    kafka = kafka_settings(options)
    inputs = split_values(options.input_topics)
    if not inputs:
        raise ConfigError("no topic given", "--input-topic")
    hydration = hydration_settings(options)
    return RunConfig(
        kafka=kafka,
        input_topics=inputs,
        output_topic=output_topic,
        output_suffix=output_suffix,
        application_id=options.application_id,
        format=options.format_,
        format_options=format_options(options),
        available_now=options.available_now,
        max_dlq_ratio=options.max_dlq_ratio,
        hydration=hydration,
        large_value_threshold=options.large_value_threshold or None,
        large_value_compression=options.large_value_compression,
        log_level=options.log_level.upper(),
        log_format=options.log_format,
        progress_interval_s=options.progress_interval / 1000,
        metrics_port=options.metrics_port,
        metrics_host=options.metrics_host or "",
        reselect=reselect_settings(options),
    )


def _outputs(options: RunOptions) -> tuple[str | None, str | None]:
    """--output-topic or --output-suffix: exactly one, and not an internal topic's name."""
    output_topic, output_suffix = options.output_topic, options.output_suffix
    if (output_topic is None) == (output_suffix is None):
        raise ConfigError("give exactly one of --output-topic or --output-suffix")
    if output_topic is not None:
        clash = internal_topic_clash(options.application_id, {"": output_topic})
        if clash is not None:
            raise ConfigError(clash, "--output-topic")
    return output_topic, output_suffix


def kafka_settings(options: RunOptions) -> ClientSettings:
    """The cluster and the -X properties every Kafka client of the run starts from."""
    try:
        properties = parse_properties(options.kafka_properties)
    except ClientConfigError as exc:
        raise ConfigError(str(exc), "-X", "--kafka-property") from None
    if not options.bootstrap_servers.strip():
        raise ConfigError("no server given", "--bootstrap-servers")
    return ClientSettings(options.bootstrap_servers, properties)


def hydration_settings(options: RunOptions) -> HydrationSettings:
    return HydrationSettings(
        fill_before=options.fill_before,
        on_stale=OnStale(options.on_stale),
        on_unresolved=OnUnresolved(options.on_unresolved),
        tombstone_retention_ms=options.tombstone_retention,
        handoff_timeout_ms=options.handoff_timeout,
        state_ttl_ms=options.state_ttl,
        max_record_bytes=options.max_record_bytes,
        max_parked_records=options.max_parked_records,
        max_parked_bytes=options.max_parked_bytes,
        changed_header=options.changed_header,
    )


def format_options(options: RunOptions) -> FormatOptions:
    """How values are read and written, checked against the format that reads them."""
    url = (options.schema_registry_url or "").strip()
    try:
        registry = parse_properties(options.schema_registry_properties)
    except ClientConfigError as exc:
        raise ConfigError(str(exc), "--schema-registry-property") from None
    if registry and not url:
        raise ConfigError("needs --schema-registry-url", "--schema-registry-property")
    if "url" in registry:
        raise ConfigError("give the URL with --schema-registry-url", "--schema-registry-property")
    chosen = FormatOptions(
        placeholder=options.placeholder,
        fill_absent=options.fill_absent,
        schema_registry_url=url or None,
        schema_registry_config=tuple(sorted(registry.items())),
        schema_registry_wait_s=options.schema_registry_timeout / 1000,
    )
    _check_placeholder(chosen)
    _check_format(options.format_, chosen)
    return chosen


def reselect_settings(options: RunOptions) -> ReselectSettings | None:
    """`--reselect` and its limits (None: off)."""
    if not options.reselect:
        return None
    return ReselectSettings(
        options.reselect,
        max_qps=options.reselect_max_qps,
        statement_timeout_ms=options.reselect_timeout or DEFAULT_STATEMENT_TIMEOUT_MS,
    )


def build_embedded_settings(options: RunOptions) -> EmbeddedSettings:
    """What only `--engine embedded` uses; its state directory must be local."""
    try:
        state_dir = local_state_dir(options.state_dir)
    except ConfigError as exc:
        raise ConfigError(str(exc), "--state-dir") from None
    return EmbeddedSettings(
        state_dir=state_dir,
        workers=options.workers or default_workers(),
        workers_fit_input=options.workers is None,
        commit_interval_ms=options.commit_interval,
        backlog_commit_interval_ms=options.backlog_commit_interval,
        startup_timeout_ms=options.startup_timeout,
        state_cache_bytes=options.state_cache_bytes,
    )


def build_spark_settings(options: RunOptions, given: Collection[str] = ()) -> SparkSettings:
    """What only `--engine spark` uses; its trigger is --commit-interval only when given."""
    try:
        conf = parse_spark_conf(options.spark_conf)
    except ConfigError as exc:
        raise ConfigError(str(exc), "--spark-conf") from None
    trigger = SPARK_TRIGGER_INTERVAL_MS
    if "commit_interval" in given:
        trigger = options.commit_interval
    return SparkSettings(
        state_dir=str(options.state_dir),
        master=options.master,
        conf=conf,
        max_offsets_per_trigger=options.max_offsets_per_trigger,
        kafka_io=options.spark_kafka_io or "auto",
        trigger_interval_ms=trigger,
    )


def _check_placeholder(options: FormatOptions) -> None:
    try:
        options.placeholder_bytes  # noqa: B018 - validates hex: placeholders
    except ValueError:
        raise ConfigError(
            f"{options.placeholder!r} is not valid hex after 'hex:'", "--placeholder"
        ) from None


def _check_format(name: str, options: FormatOptions) -> None:
    # Imported here: the codecs are not needed to read a configuration.
    from hydrator.formats import FormatOptionError, codec_for

    try:
        codec_for(name, options)
    except FormatOptionError as exc:
        raise ConfigError(str(exc), exc.option) from None
    except ValueError as exc:
        raise ConfigError(f"{name} is not available yet ({exc})", "--format") from None
