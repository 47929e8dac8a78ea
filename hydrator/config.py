"""What a `hydrator run` is asked to do, one typed value per concern (RunConfig: what every
engine uses; EmbeddedSettings, SparkSettings: what only one does; RunSettings: the three, as
hydrator/cli/run_settings.py builds them from the options), plus the parsing its options share.

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

from hydrator.core.settings import HydrationSettings
from hydrator.errors import ConfigurationError
from hydrator.formats.options import FormatOptions
from hydrator.kafka.client_config import ClientSettings
from hydrator.reselect.settings import ReselectSettings
from state.large import DEFAULT_COMPRESSION

DEFAULT_APPLICATION_ID = "toast-hydrator"
# The directory under the user's state directory where state lives unless --state-dir says.
STATE_DIR_NAME = "toast-hydrator"

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


def default_state_dir() -> Path:
    """Where state lives unless --state-dir says: the user's state directory, by the platform's
    convention (Linux: `$XDG_STATE_HOME/toast-hydrator`, else `~/.local/state/toast-hydrator`;
    macOS: `~/Library/Application Support/toast-hydrator`), read when asked, so that the run and
    the state tools find the same one."""
    import platformdirs

    return Path(platformdirs.user_state_dir(STATE_DIR_NAME, appauthor=False))


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
    """What every engine uses: the topics, the hydration rules and formats, progress, logging
    and metrics, the Kafka clients' settings, --reselect."""

    # The cluster and the -X client properties both engines' Kafka clients start from.
    kafka: ClientSettings
    input_topics: tuple[str, ...]
    output_topic: str | None = None
    output_suffix: str | None = None
    application_id: str = DEFAULT_APPLICATION_ID
    format: str = "auto"
    format_options: FormatOptions = field(default_factory=FormatOptions)
    available_now: bool = False
    # --available-now: a run that dead-letters more than this share of what it read fails
    # (hydrator/metrics/dead_letter_ratio.py); 0 turns the check off.
    max_dlq_ratio: float = 0.5
    hydration: HydrationSettings = field(default_factory=HydrationSettings)
    progress_interval_s: float = 10.0
    # Column values over this many bytes (packed) are kept apart from the row (state/large.py);
    # None keeps every value in the row.
    large_value_threshold: int | None = 2048
    # ... and compressed one by one so ("none": per block and per batch, off the event's path).
    large_value_compression: str = DEFAULT_COMPRESSION
    # Where /metrics, /healthz and /readyz are served; None: not served. The host "" is every
    # interface (the default); 127.0.0.1 keeps them on this machine.
    metrics_port: int | None = None
    metrics_host: str = ""
    # How the run logs (a worker process sets its logging up from these).
    log_level: str = "INFO"
    log_format: str = "text"
    # --reselect: read placeholders nothing else fills from the Postgres source (None: off).
    reselect: ReselectSettings | None = None


@dataclass(frozen=True)
class EmbeddedSettings:
    """What only `--engine embedded` uses."""

    # A local directory (RocksDB needs one).
    state_dir: Path = field(default_factory=default_state_dir)
    # Worker processes (1: the engine runs in the calling process).
    workers: int = 1
    # `workers` is the default (one per CPU), which the run lowers to the input's partition
    # count: a worker beyond it would get no partition (engines/embedded/workers.py).
    workers_fit_input: bool = False
    # How often the open batch commits while the engine keeps up ...
    commit_interval_ms: int = 100
    # ... and how long it may stay open while a backlog waits (engines/embedded/batch.py).
    backlog_commit_interval_ms: int = 5_000
    # How long a start-up (and a restart after an outage) waits for a broker to answer.
    startup_timeout_ms: int = 300_000
    # The decoded-state cache budget of the run, shared by its tasks (and workers).
    state_cache_bytes: int = 256 * 1024 * 1024


SPARK_KAFKA_IO = ("auto", "connector", "python")
# What a micro-batch waits for at most when --commit-interval is not given.
SPARK_TRIGGER_INTERVAL_MS = 500


@dataclass(frozen=True)
class SparkSettings:
    """What only `--engine spark` uses."""

    # Where the query's checkpoint goes: a local directory or a URI it can use (s3a://...).
    state_dir: Path | str = field(default_factory=default_state_dir)
    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None
    # auto | connector | python: Spark's Kafka connector or the project's Python source and sink
    kafka_io: str = "auto"
    # the micro-batch trigger: --commit-interval when given
    trigger_interval_ms: int = SPARK_TRIGGER_INTERVAL_MS


@dataclass(frozen=True)
class RunSettings:
    """A run's settings, built once from its options (hydrator/cli/run_settings.py): what every
    engine uses, and what only the chosen engine does."""

    config: RunConfig
    engine: EmbeddedSettings | SparkSettings
    # options given that the chosen engine does not use, by parameter name (warned about)
    ignored: tuple[str, ...] = ()

    @property
    def engine_name(self) -> str:
        return "spark" if isinstance(self.engine, SparkSettings) else "embedded"


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
