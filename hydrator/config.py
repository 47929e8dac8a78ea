"""What a `hydrator run` is asked to do, engine-neutral, plus the parsing its options share.

Values come from (highest first) the command line, `HYDRATOR_<NAME>` environment variables, a
TOML config file, then the defaults here. The file uses the long option names, with dashes or
underscores, at top level or under a `[run]` table (or both: one set, a key in both is an error);
a single string stands for a list of one:

    bootstrap-servers = "kafka:9092"
    input-topic = ["db.public.orders"]
    output-suffix = ".enriched"
    handoff-timeout = "2m"
    kafka-property = ["security.protocol=SASL_SSL"]
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

from hydrator.core.settings import HydrationSettings, OnStale, OnUnresolved
from hydrator.errors import ConfigurationError
from hydrator.formats.options import FormatOptions
from hydrator.kafka.client_config import ClientConfigError, parse_properties
from hydrator.postgres.settings import DEFAULT_STATEMENT_TIMEOUT_MS, ReselectSettings
from hydrator.topology.layout import internal_topic_clash
from state.large import DEFAULT_COMPRESSION

DEFAULT_APPLICATION_ID = "toast-hydrator"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|kib|k|mb|mib|m|gb|gib|g)?\s*$", re.IGNORECASE)
_SIZE_BYTES = {
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
}


_APPLICATION_ID = re.compile(r"[A-Za-z0-9._-]+")
# `scheme:/...`: what Hadoop (and so Spark's checkpoint) reads as a URI rather than a path
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


class ConfigError(ConfigurationError, ValueError):
    """A bad configuration value; the message names the option, or `options` do (the CLI shows
    them as click shows a bad option: `Invalid value for '--state-dir': ...`)."""

    def __init__(self, message: str, *options: str) -> None:
        super().__init__(message)
        self.options = options


class StateDirUnusable(ConfigurationError, RuntimeError):
    """The state directory cannot be created or written (a configuration problem)."""


def check_application_id(value: str) -> str:
    """The id names a directory under --state-dir, a consumer group and topic prefixes: only
    letters, digits, '.', '_' and '-', and not `.` or `..` (which would leave --state-dir)."""
    if not _APPLICATION_ID.fullmatch(value) or value in (".", ".."):
        raise ConfigError(
            f"{value!r} is not an application id: use letters, digits, '.', '_' and '-' "
            "(not '.' or '..' alone)"
        )
    return value


def is_uri(location: str | Path) -> bool:
    """`s3a://bucket/dir`, `file:///var/lib/x`: a URI, not a path."""
    return isinstance(location, str) and _URI.match(location) is not None


def local_state_dir(location: str | Path) -> Path:
    """The embedded engine's --state-dir: a local directory (RocksDB needs one), as a path or a
    `file:` URI."""
    if not is_uri(location):
        return Path(location)
    parts = urlsplit(str(location))
    if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
        raise ConfigError(
            f"{location} is not a local directory: the embedded engine keeps its state on a "
            "local disk (a path or file:///...); URIs of other filesystems are for --engine spark"
        )
    return Path(url2pathname(parts.path))


@dataclass(frozen=True)
class RunConfig:
    engine: str
    bootstrap_servers: str
    input_topics: tuple[str, ...]
    output_topic: str | None = None
    output_suffix: str | None = None
    # A local directory; the Spark engine also takes a URI its checkpoint can use (s3a://...).
    state_dir: Path | str = Path("hydrator-state")
    application_id: str = DEFAULT_APPLICATION_ID
    format: str = "auto"
    format_options: FormatOptions = field(default_factory=FormatOptions)
    available_now: bool = False
    # --available-now: a run that dead-letters more than this share of what it read fails
    # (hydrator/metrics/dead_letter_ratio.py); 0 turns the check off.
    max_dlq_ratio: float = 0.5
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    hydration: HydrationSettings = field(default_factory=HydrationSettings)
    commit_interval_ms: int = 100
    # Embedded: how long a batch may stay open while a backlog waits (engines/embedded/loop.py).
    backlog_commit_interval_ms: int = 5_000
    progress_interval_s: float = 10.0
    # How long a start-up (and a restart after an outage) waits for a broker to answer.
    startup_timeout_ms: int = 300_000
    # Embedded: the decoded-state cache budget of the run, shared by its tasks.
    state_cache_bytes: int = 256 * 1024 * 1024
    # Column values over this many bytes (packed) are kept compressed and apart from the row
    # (state/large.py); None keeps every value in the row.
    large_value_threshold: int | None = 2048
    # ... compressed so (lz4 costs less CPU, zstd writes fewer bytes).
    large_value_compression: str = DEFAULT_COMPRESSION
    # Where /metrics, /healthz and /readyz are served; None: not served. The host "" is every
    # interface (the default); 127.0.0.1 keeps them on this machine.
    metrics_port: int | None = None
    metrics_host: str = ""
    # Embedded: worker processes (1: the engine runs in the calling process).
    workers: int = 1
    # How the run logs (a worker process sets its logging up from these).
    log_level: str = "INFO"
    log_format: str = "text"
    # --reselect: read placeholders nothing else fills from the Postgres source (None: off).
    reselect: ReselectSettings | None = None


@dataclass(frozen=True)
class SparkOptions:
    """What only `--engine spark` uses."""

    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parse_spark_conf(items: Iterable[str]) -> dict[str, str]:
    """`["spark.a=1", "spark.b=x=y"]` -> `{"spark.a": "1", "spark.b": "x=y"}`."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{item!r} is not KEY=VALUE")
        conf[key] = value
    return conf


def parse_duration_ms(text: str) -> int:
    """`"500ms"`, `"30s"`, `"2m"`, `"24h"`, `"7d"`; a bare number is seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration like 500ms, 30s, 2m, 24h or 7d")
    number, unit = match.groups()
    return int(float(number) * _DURATION_MS[unit or "s"])


def parse_size_bytes(text: str) -> int:
    """`"16MB"`, `"2kb"`, `"1048576"`: binary multiples."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size like 2048, 2KB or 16MB")
    number, unit = match.groups()
    return int(number) * _SIZE_BYTES[(unit or "b").lower()]


def format_duration_ms(ms: int) -> str:
    """The shortest spelling `parse_duration_ms` reads back to exactly `ms`."""
    for unit, size in sorted(_DURATION_MS.items(), key=lambda item: -item[1]):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def format_size_bytes(size: int) -> str:
    """The shortest spelling `parse_size_bytes` reads back to exactly `size`."""
    for unit, factor in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def load_config_file(path: Path, section: str = "run") -> dict[str, Any]:
    """Option values from a TOML file, keyed by click parameter name (underscores). Keys at top
    level and under `[run]` are one set: a key given in both places is an error."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    table = data.pop(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [{section}] is not a table")
    outside = {name.replace("-", "_"): value for name, value in data.items()}
    inside = {name.replace("-", "_"): value for name, value in table.items()}
    if twice := sorted(outside.keys() & inside.keys()):
        names = ", ".join(name.replace("_", "-") for name in twice)
        raise ConfigError(
            f"config file {path}: {names} set both at top level and under [{section}]; keep one"
        )
    return {**outside, **inside}


def split_values(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """Several values may come in one string (env var, config file): split on commas."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    return tuple(part.strip() for v in values for part in str(v).split(",") if part.strip())


def build_config(options: Mapping[str, Any]) -> RunConfig:
    """The values of `run`'s options (by parameter name) -> RunConfig; a cross-option problem
    raises ConfigError naming the options."""
    output_topic, output_suffix = options["output_topic"], options["output_suffix"]
    if (output_topic is None) == (output_suffix is None):
        raise ConfigError("give exactly one of --output-topic or --output-suffix")
    if output_topic is not None:
        clash = internal_topic_clash(options["application_id"], {"": output_topic})
        if clash is not None:
            raise ConfigError(clash, "--output-topic")
    try:
        properties = parse_properties(options["kafka_properties"])
    except ClientConfigError as exc:
        raise ConfigError(str(exc), "-X", "--kafka-property") from None
    if not options["bootstrap_servers"].strip():
        raise ConfigError("no server given", "--bootstrap-servers")
    inputs = split_values(options["input_topics"])
    if not inputs:
        raise ConfigError("no topic given", "--input-topic")
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
        changed_header=options.get("changed_header", True),
    )
    format_options = FormatOptions(
        placeholder=options["placeholder"],
        fill_absent=options["fill_absent"],
        **_schema_registry(options),
    )
    _check_placeholder(format_options)
    _check_format(options["format_"], format_options)
    state_dir: Path | str = str(options["state_dir"])
    if options["engine"] != "spark":
        try:
            state_dir = local_state_dir(state_dir)
        except ConfigError as exc:
            raise ConfigError(str(exc), "--state-dir") from None
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
        max_dlq_ratio=options["max_dlq_ratio"],
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
        metrics_host=options.get("metrics_host") or "",
        reselect=_reselect_settings(options),
    )


def _reselect_settings(options: Mapping[str, Any]) -> ReselectSettings | None:
    """`--reselect` and its limits (None: off)."""
    dsn = options.get("reselect")
    if not dsn:
        return None
    return ReselectSettings(
        dsn,
        max_qps=options.get("reselect_max_qps"),
        statement_timeout_ms=options.get("reselect_timeout") or DEFAULT_STATEMENT_TIMEOUT_MS,
    )


def build_spark_options(options: Mapping[str, Any]) -> SparkOptions:
    """The values of `run`'s options -> what only `--engine spark` uses."""
    try:
        conf = parse_spark_conf(options["spark_conf"])
    except ConfigError as exc:
        raise ConfigError(str(exc), "--spark-conf") from None
    return SparkOptions(options["master"], conf, options["max_offsets_per_trigger"])


def _schema_registry(options: Mapping[str, Any]) -> dict[str, Any]:
    """The schema registry's FormatOptions fields from `run`'s options."""
    url = (options.get("schema_registry_url") or "").strip()
    try:
        settings = parse_properties(options.get("schema_registry_properties") or ())
    except ClientConfigError as exc:
        raise ConfigError(str(exc), "--schema-registry-property") from None
    if settings and not url:
        raise ConfigError("needs --schema-registry-url", "--schema-registry-property")
    if "url" in settings:
        raise ConfigError("give the URL with --schema-registry-url", "--schema-registry-property")
    return {
        "schema_registry_url": url or None,
        "schema_registry_config": tuple(sorted(settings.items())),
        "schema_registry_wait_s": options.get("schema_registry_timeout", 60_000) / 1000,
    }


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
