"""The options of `hydrator run` (and so of `hydrator config show`, which takes the same)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from hydrator.cli.config_file import load_run_config
from hydrator.cli.params import (
    ENGINES,
    FORMATS,
    ApplicationId,
    Duration,
    KafkaProperty,
    Size,
    SizeOrOff,
    StateDir,
    env_name,
    option,
)
from hydrator.config import DEFAULT_APPLICATION_ID
from hydrator.core.settings import OnStale, OnUnresolved
from hydrator.formats.options import DEFAULT_PLACEHOLDER
from hydrator.metrics.dead_letter_ratio import DEFAULT_MAX_DLQ_RATIO
from hydrator.ops.logs import LOG_FORMATS
from state.large import COMPRESSIONS, DEFAULT_COMPRESSION

Command = TypeVar("Command", bound=Callable[..., None])


def run_options(command: Command) -> Command:
    """Every option of `run`, in the order its --help lists them."""
    for add_option in reversed(_RUN_OPTIONS):
        command = add_option(command)
    return command


_RUN_OPTIONS: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
    option(
        "--config",
        type=click.Path(dir_okay=False),
        envvar=env_name("config"),
        callback=load_run_config,
        is_eager=True,
        expose_value=False,
        help="TOML file with option values (long names, at top level or under [run]).",
    ),
    option(
        "--engine",
        type=click.Choice(ENGINES),
        default="embedded",
        show_default=True,
        envvar=env_name("engine"),
    ),
    option(
        "--bootstrap-servers",
        required=True,
        envvar=env_name("bootstrap_servers"),
        metavar="HOST:PORT[,...]",
    ),
    option(
        "--input-topic",
        "input_topics",
        multiple=True,
        required=True,
        envvar=env_name("input_topic"),
        help="Raw CDC topic; repeat for several.",
    ),
    option(
        "--output-topic",
        envvar=env_name("output_topic"),
        help="Enriched topic (all inputs write to it).",
    ),
    option(
        "--output-suffix",
        envvar=env_name("output_suffix"),
        help="Enriched topic per input: <input><suffix>.",
    ),
    option(
        "--state-dir",
        type=StateDir(),
        default="hydrator-state",
        show_default=True,
        envvar=env_name("state_dir"),
        help="Local state directory; --engine spark also takes a URI its checkpoint can use "
        "(file://, hdfs://, s3a://...).",
    ),
    option(
        "--application-id",
        type=ApplicationId(),
        default=DEFAULT_APPLICATION_ID,
        show_default=True,
        envvar=env_name("application_id"),
        help="Consumer group and prefix of the internal topics.",
    ),
    option(
        "--format",
        "format_",
        type=click.Choice(FORMATS),
        default="auto",
        show_default=True,
        envvar=env_name("format"),
    ),
    option(
        "--available-now",
        is_flag=True,
        envvar=env_name("available_now"),
        help="Process everything available (incl. internal topics), then exit 0.",
    ),
    option(
        "--max-dlq-ratio",
        type=click.FloatRange(0, 1),
        default=DEFAULT_MAX_DLQ_RATIO,
        show_default=True,
        envvar=env_name("max_dlq_ratio"),
        help="--available-now: exit 65 when more than this share of the records read went to "
        "the dead-letter topic (0: never).",
    ),
    option(
        "-X",
        "--kafka-property",
        "kafka_properties",
        type=KafkaProperty(),
        multiple=True,
        metavar="NAME=VALUE",
        envvar=env_name("kafka_property"),
        help="librdkafka property for every client (consumer./producer./admin. prefix for one "
        "kind). Give secrets through HYDRATOR_KAFKA_PROPERTY or --config, not on the command line.",
    ),
    option(
        "--placeholder",
        default=DEFAULT_PLACEHOLDER,
        show_default=True,
        envvar=env_name("placeholder"),
        help="Debezium's unavailable-value placeholder (hex:... for bytes).",
    ),
    option(
        "--fill-absent",
        is_flag=True,
        envvar=env_name("fill_absent"),
        help="Patch streams (--format debezium): a stored column absent from an event was not "
        "shipped; fill it (in after of c/r/u, before of u/d).",
    ),
    option(
        "--schema-registry-url",
        envvar=env_name("schema_registry_url"),
        metavar="URL",
        help="Confluent-compatible schema registry: Confluent-framed Avro values and keys are "
        "decoded with their writer schema, and written back with the same schema id "
        "(--format auto, debezium, debezium-flat).",
    ),
    option(
        "--schema-registry-property",
        "schema_registry_properties",
        type=KafkaProperty(),
        multiple=True,
        metavar="NAME=VALUE",
        envvar=env_name("schema_registry_property"),
        help="Schema registry client setting (basic.auth.user.info, ssl.ca.location, ...). Give "
        "secrets through HYDRATOR_SCHEMA_REGISTRY_PROPERTY or --config.",
    ),
    option(
        "--schema-registry-timeout",
        type=Duration(),
        default="60s",
        show_default=True,
        envvar=env_name("schema_registry_timeout"),
        help="How long a schema registry that does not answer is retried before the run stops "
        "(embedded: exit 75, for a supervisor to start it again).",
    ),
    option(
        "--fill-before/--no-fill-before",
        default=True,
        show_default=True,
        envvar=env_name("fill_before"),
    ),
    option(
        "--on-stale",
        type=click.Choice([e.value for e in OnStale]),
        default="drop",
        show_default=True,
        envvar=env_name("on_stale"),
    ),
    option(
        "--on-unresolved",
        type=click.Choice([e.value for e in OnUnresolved]),
        default="keep",
        show_default=True,
        envvar=env_name("on_unresolved"),
    ),
    option(
        "--changed-header/--no-changed-header",
        default=True,
        show_default=True,
        envvar=env_name("changed_header"),
        help="Header hydrator.changed: the columns that differ from the previous full row.",
    ),
    option(
        "--reselect",
        metavar="DSN",
        default=None,
        envvar=env_name("reselect"),
        help="Postgres sources (--engine embedded): read placeholders nothing else fills from "
        "the source table by primary key (default: off). A libpq URI or key=value string; give "
        "its password through HYDRATOR_RESELECT, --config or PGPASSWORD, not on the command line.",
    ),
    option(
        "--reselect-max-qps",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        envvar=env_name("reselect_max_qps"),
        help="At most this many --reselect queries a second (default: no cap); a batch over it "
        "leaves its columns to --on-unresolved.",
    ),
    option(
        "--reselect-timeout",
        type=Duration(),
        default="2s",
        show_default=True,
        envvar=env_name("reselect_timeout"),
        help="Statement timeout of a --reselect query; past it the columns fall back to "
        "--on-unresolved and the stream goes on.",
    ),
    option(
        "--tombstone-retention",
        type=Duration(),
        default="24h",
        show_default=True,
        envvar=env_name("tombstone_retention"),
    ),
    option(
        "--handoff-timeout",
        type=Duration(),
        default="60s",
        show_default=True,
        envvar=env_name("handoff_timeout"),
    ),
    option(
        "--state-ttl",
        type=Duration(),
        default=None,
        envvar=env_name("state_ttl"),
        help="Forget keys untouched this long (default: never).",
    ),
    option(
        "--max-record-bytes",
        type=Size(),
        default="16MB",
        show_default=True,
        envvar=env_name("max_record_bytes"),
        help="Larger input keys or values go to the DLQ; the topics the engine creates take "
        "records of 2x (outputs, handoffs, DLQ) and 3x (state changelog) this, plus 1 MiB.",
    ),
    option(
        "--max-parked-records",
        type=click.IntRange(min=1),
        default=1000,
        show_default=True,
        envvar=env_name("max_parked_records"),
        help="Records one key may hold while its key change waits; more go to the DLQ.",
    ),
    option(
        "--max-parked-bytes",
        type=Size(),
        default="8MB",
        show_default=True,
        envvar=env_name("max_parked_bytes"),
        help="Bytes one key's waiting records may take; more go to the DLQ.",
    ),
    option(
        "--state-cache-bytes",
        type=Size(),
        default="256MB",
        show_default=True,
        envvar=env_name("state_cache_bytes"),
        help="Embedded: memory for decoded states kept between records, shared by all tasks.",
    ),
    option(
        "--large-value-threshold",
        type=SizeOrOff(),
        default="2KB",
        show_default=True,
        envvar=env_name("large_value_threshold"),
        help="Column values larger than this are stored compressed, and (embedded) under their "
        "own key, written only when they change; 0 or off keeps every value in the row.",
    ),
    option(
        "--large-value-compression",
        type=click.Choice(COMPRESSIONS),
        default=DEFAULT_COMPRESSION,
        show_default=True,
        envvar=env_name("large_value_compression"),
        help="How those values are compressed: zstd writes about half lz4's bytes to state and "
        "changelog, lz4 costs a third of zstd's CPU. Either reads state written with the other.",
    ),
    option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        envvar=env_name("workers"),
        help="Embedded: worker processes sharing the consumer group, each with its own tasks "
        "(default: one per CPU); 1 runs the engine in this process.",
    ),
    option(
        "--commit-interval",
        type=Duration(),
        default="100ms",
        show_default=True,
        envvar=env_name("commit_interval"),
        help="How often a transaction commits.",
    ),
    option(
        "--backlog-commit-interval",
        type=Duration(),
        default="5s",
        show_default=True,
        envvar=env_name("backlog_commit_interval"),
        help="Embedded: how long a transaction may stay open while 5,000 or more input records "
        "wait (a backlog); no more than --commit-interval commits at that pace always.",
    ),
    option(
        "--progress-interval",
        type=Duration(),
        default="10s",
        show_default=True,
        envvar=env_name("progress_interval"),
    ),
    option(
        "--startup-timeout",
        type=Duration(),
        default="5m",
        show_default=True,
        envvar=env_name("startup_timeout"),
        help="Embedded: how long to wait for a broker at start-up and after an outage before "
        "exiting 75.",
    ),
    option(
        "--master",
        default="local[*]",
        show_default=True,
        envvar=env_name("master"),
        help="Spark master URL (--engine spark).",
    ),
    option(
        "--spark-conf",
        "spark_conf",
        multiple=True,
        metavar="KEY=VALUE",
        envvar=env_name("spark_conf"),
        help="Spark configuration property (--engine spark); repeat for several.",
    ),
    option(
        "--max-offsets-per-trigger",
        type=click.IntRange(min=1),
        default=None,
        envvar=env_name("max_offsets_per_trigger"),
        help="Cap on input records per micro-batch (--engine spark).",
    ),
    option(
        "--metrics-port",
        type=click.IntRange(0, 65535),
        default=None,
        envvar=env_name("metrics_port"),
        help="Serve Prometheus /metrics, /healthz and /readyz on this port (default: off).",
    ),
    option(
        "--metrics-host",
        default="",
        envvar=env_name("metrics_host"),
        help="The address --metrics-port listens on (default: every interface; 127.0.0.1 "
        "keeps it on this machine).",
    ),
    option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        default="INFO",
        show_default=True,
        envvar=env_name("log_level"),
    ),
    option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="text",
        show_default=True,
        envvar=env_name("log_format"),
        help="json: one object per line (level, logger, message, application id, counts).",
    ),
]
