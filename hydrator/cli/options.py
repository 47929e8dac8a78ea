"""The options of `hydrator run` (and so of `hydrator config show`, which takes the same)."""

from __future__ import annotations

from typing import Any

import click

from hydrator.cli.config_file import load_run_config
from hydrator.cli.params import (
    PORT,
    Command,
    Duration,
    KafkaProperty,
    OptionDecorator,
    Size,
    SizeOrOff,
    application_id_option,
    bootstrap_servers_option,
    engine_option,
    env_option,
    format_option,
    kafka_property_option,
    startup_timeout_option,
    state_dir_option,
)
from hydrator.config import SPARK_KAFKA_IO
from hydrator.core.settings import OnStale, OnUnresolved
from hydrator.formats.options import DEFAULT_PLACEHOLDER
from hydrator.metrics.dead_letter_ratio import DEFAULT_MAX_DLQ_RATIO
from hydrator.ops.logs import LOG_FORMATS
from state.large import COMPRESSIONS, DEFAULT_COMPRESSION

# How `run --help` (and `config show --help`) groups the options (hydrator/cli/help.py): by
# parameter name. A new option names its section here.
RUN_SECTIONS = (
    (
        "Input and output",
        (
            "config", "engine", "input_topics", "output_topic", "output_suffix",
            "application_id", "available_now", "max_dlq_ratio",
        ),
    ),
    (
        "Kafka",
        (
            "bootstrap_servers", "kafka_properties", "startup_timeout", "commit_interval",
            "backlog_commit_interval", "max_record_bytes",
        ),
    ),
    (
        "Format",
        (
            "format_", "placeholder", "fill_absent", "schema_registry_url",
            "schema_registry_properties", "schema_registry_timeout",
        ),
    ),
    (
        "Hydration rules",
        (
            "fill_before", "on_stale", "on_unresolved", "changed_header", "tombstone_retention",
            "handoff_timeout", "state_ttl", "max_parked_records", "max_parked_bytes",
        ),
    ),
    (
        "State",
        ("state_dir", "state_cache_bytes", "large_value_threshold", "large_value_compression"),
    ),
    ("Re-select (Postgres sources)", ("reselect", "reselect_max_qps", "reselect_timeout")),
    ("Spark engine", ("master", "spark_conf", "spark_kafka_io", "max_offsets_per_trigger")),
    (
        "Operations",
        (
            "workers", "progress_interval", "metrics_port", "metrics_host", "log_level",
            "log_format",
        ),
    ),
)  # fmt: skip


def run_options(command: Command) -> Command:
    """Every option of `run`, in the order its --help lists them."""
    for add_option in reversed(_RUN_OPTIONS):
        command = add_option(command)
    return command


_RUN_OPTIONS: list[OptionDecorator[Any]] = [
    env_option(
        "--config",
        type=click.Path(dir_okay=False),
        callback=load_run_config,
        is_eager=True,
        expose_value=False,
        help="TOML file with option values (long names, at top level or under [run]).",
    ),
    engine_option(),
    bootstrap_servers_option(),
    env_option(
        "--input-topic",
        "input_topics",
        multiple=True,
        required=True,
        help="Raw CDC topic; repeat for several.",
    ),
    env_option("--output-topic", help="Enriched topic (all inputs write to it)."),
    env_option(
        "--output-suffix",
        help="Enriched topic per input: <input><suffix> (give this or --output-topic).",
    ),
    state_dir_option(
        "Local state directory; --engine spark also takes a URI its checkpoint can use "
        "(file://, hdfs://, s3a://...).",
        uri=True,
    ),
    application_id_option(),
    format_option(
        "How values are read: auto (each record's format detected from its value), debezium "
        "(Debezium JSON, bare or schema/payload), debezium-flat or flat (rows from Debezium's "
        "ExtractNewRecordState), cockroachdb or cockroach (changefeed JSON, wrapped), ydb "
        "(changefeed JSON), cassandra (Debezium's Cassandra connector)."
    ),
    env_option(
        "--available-now",
        is_flag=True,
        help="Process everything available (incl. internal topics), then exit 0.",
    ),
    env_option(
        "--max-dlq-ratio",
        type=click.FloatRange(0, 1),
        default=DEFAULT_MAX_DLQ_RATIO,
        help="--available-now: exit 65 when more than this share of the records read went to "
        "the dead-letter topic (0: never).",
    ),
    kafka_property_option(),
    env_option(
        "--placeholder",
        default=DEFAULT_PLACEHOLDER,
        help="Debezium's unavailable-value placeholder (hex:... for bytes).",
    ),
    env_option(
        "--fill-absent",
        is_flag=True,
        help="Patch streams (--format debezium): a stored column absent from an event was not "
        "shipped; fill it (in after of c/r/u, before of u/d).",
    ),
    env_option(
        "--schema-registry-url",
        metavar="URL",
        help="Confluent-compatible schema registry: Confluent-framed Avro values and keys are "
        "decoded with their writer schema, and written back with the same schema id "
        "(--format auto, debezium, debezium-flat).",
    ),
    env_option(
        "--schema-registry-property",
        "schema_registry_properties",
        type=KafkaProperty(),
        multiple=True,
        metavar="NAME=VALUE",
        help="Schema registry client setting (basic.auth.user.info, ssl.ca.location, ...). Give "
        "secrets through HYDRATOR_SCHEMA_REGISTRY_PROPERTY or --config.",
    ),
    env_option(
        "--schema-registry-timeout",
        type=Duration(),
        default="60s",
        help="How long a schema registry that does not answer is retried before the run stops "
        "(embedded: exit 75, for a supervisor to start it again).",
    ),
    env_option(
        "--fill-before/--no-fill-before",
        default=True,
        help="Replace a null or key-only `before` with the stored row.",
    ),
    env_option(
        "--on-stale",
        type=click.Choice([e.value for e in OnStale]),
        default="drop",
        help="An event at or before the stored position (a redelivery): drop it (counted), or "
        "forward it unchanged with header hydrator.stale.",
    ),
    env_option(
        "--on-unresolved",
        type=click.Choice([e.value for e in OnUnresolved]),
        default="keep",
        help="A missing column no stored row can fill: keep the marker (listed in header "
        "hydrator.unresolved), null it, drop the event, send it to the DLQ, or fail the run.",
    ),
    env_option(
        "--changed-header/--no-changed-header",
        default=True,
        help="Header hydrator.changed: the columns that differ from the previous full row.",
    ),
    env_option(
        "--reselect",
        metavar="DSN",
        default=None,
        help="Postgres sources: read placeholders nothing else fills from the source table by "
        "primary key, one query per table per batch (default: off). A libpq URI or key=value "
        "string; give its password through HYDRATOR_RESELECT, --config or PGPASSWORD, not on "
        "the command line.",
    ),
    env_option(
        "--reselect-max-qps",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="At most this many --reselect queries a second (default: no cap; Spark: shared "
        "among the query's partitions); a batch over it leaves its columns to --on-unresolved.",
    ),
    env_option(
        "--reselect-timeout",
        type=Duration(),
        default="2s",
        help="Statement timeout of a --reselect query; past it the columns fall back to "
        "--on-unresolved and the stream goes on.",
    ),
    env_option(
        "--tombstone-retention",
        type=Duration(),
        default="24h",
        help="How long (processing time) a delete keeps late, older events of its key out.",
    ),
    env_option(
        "--handoff-timeout",
        type=Duration(),
        default="60s",
        help="How long a primary-key change's new key waits for the old row before its events "
        "go out unresolved.",
    ),
    env_option(
        "--state-ttl",
        type=Duration(),
        default=None,
        help="Forget keys untouched this long (default: never).",
    ),
    env_option(
        "--max-record-bytes",
        type=Size(),
        default="16MB",
        help="Larger input keys or values go to the DLQ; the topics the engine creates take "
        "records of 2x (outputs, handoffs, DLQ) and 3x (state changelog) this, plus 1 MiB.",
    ),
    env_option(
        "--max-parked-records",
        type=click.IntRange(min=1),
        default=1000,
        help="Records one key may hold while its key change waits; more go to the DLQ.",
    ),
    env_option(
        "--max-parked-bytes",
        type=Size(),
        default="8MB",
        help="Bytes one key's waiting records may take; more go to the DLQ.",
    ),
    env_option(
        "--state-cache-bytes",
        type=Size(),
        default="256MB",
        help="Embedded: memory for decoded states and large values kept between records, shared "
        "by all tasks (and workers).",
    ),
    env_option(
        "--large-value-threshold",
        type=SizeOrOff(),
        default="2KB",
        help="Column values larger than this are kept apart from the row, and (embedded) under "
        "their own key, written only when they change; 0 or off keeps every value in the row.",
    ),
    env_option(
        "--large-value-compression",
        type=click.Choice(COMPRESSIONS),
        default=DEFAULT_COMPRESSION,
        help="Whether those values are also compressed one by one: none (the store compresses "
        "per block, the changelog per batch), zstd or lz4. Any reads what the others "
        "wrote.",
    ),
    env_option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        help="Embedded: worker processes sharing the consumer group, each with its own tasks "
        "(default: one per CPU, at most the input's partitions); 1 runs the engine in this "
        "process.",
    ),
    env_option(
        "--commit-interval",
        type=Duration(),
        default="100ms",
        help="Embedded: how often a transaction (outputs, state, offsets) commits while the "
        "engine keeps up. Spark: the micro-batch trigger interval (default there 500ms).",
    ),
    env_option(
        "--backlog-commit-interval",
        type=Duration(),
        default="5s",
        help="Embedded: how long a transaction may stay open while 5,000 or more input records "
        "wait (a backlog); no more than --commit-interval commits at that pace always.",
    ),
    env_option(
        "--progress-interval",
        type=Duration(),
        default="10s",
        help="How often the progress line (rate, lag, parked keys, counts) is logged.",
    ),
    startup_timeout_option(
        "Embedded: how long to wait for a broker at start-up and after an outage before "
        "exiting 75 (a host name that does not resolve: exit 2 at once)."
    ),
    env_option("--master", default="local[*]", help="Spark master URL (--engine spark)."),
    env_option(
        "--spark-conf",
        "spark_conf",
        multiple=True,
        metavar="KEY=VALUE",
        help="Spark configuration property (--engine spark); repeat for several.",
    ),
    env_option(
        "--spark-kafka-io",
        type=click.Choice(SPARK_KAFKA_IO),
        default="auto",
        help="Spark: read and write Kafka through Spark's Kafka connector (spark-sql-kafka-0-10, "
        "its jars on the classpath) or the hydrator's Python source and sink; auto: the "
        "connector when it loads.",
    ),
    env_option(
        "--max-offsets-per-trigger",
        type=click.IntRange(min=1),
        default=None,
        help="Cap on input records per micro-batch (--engine spark).",
    ),
    env_option(
        "--metrics-port",
        type=PORT,
        default=None,
        help="Serve Prometheus /metrics, /healthz and /readyz on this port (default: off).",
    ),
    env_option(
        "--metrics-host",
        default="",
        show_default=False,
        help="The address --metrics-port listens on (default: every interface; 127.0.0.1 "
        "keeps it on this machine).",
    ),
    env_option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        default="INFO",
        help="The least severe log lines shown.",
    ),
    env_option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="text",
        help="json: one object per line (level, logger, message, application id, counts).",
    ),
]
