"""The run's settings are built once, by concern, from a typed view of `run`'s options
(hydrator/cli/run_settings.py): every option has its field there, and each engine's settings
hold only what that engine uses."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from hydrator.cli import run
from hydrator.cli.run_settings import EMBEDDED_ONLY, SPARK_ONLY, RunOptions, build_settings
from hydrator.config import ConfigError, EmbeddedSettings, RunConfig, SparkSettings

OPTIONS = RunOptions(
    engine="embedded",
    input_topics=("db.public.orders",),
    output_topic=None,
    output_suffix=".enriched",
    application_id="app",
    available_now=False,
    max_dlq_ratio=0.5,
    bootstrap_servers="kafka:9092",
    kafka_properties=("client.id=x",),
    startup_timeout=300_000,
    commit_interval=100,
    backlog_commit_interval=5_000,
    max_record_bytes=16 * 1024**2,
    format_="auto",
    placeholder="__debezium_unavailable_value",
    fill_absent=False,
    schema_registry_url=None,
    schema_registry_properties=(),
    schema_registry_timeout=60_000,
    fill_before=True,
    on_stale="drop",
    on_unresolved="keep",
    changed_header=True,
    tombstone_retention=86_400_000,
    handoff_timeout=60_000,
    state_ttl=None,
    max_parked_records=1000,
    max_parked_bytes=8 * 1024**2,
    state_dir="/var/lib/hydrator",
    state_cache_bytes=256 * 1024**2,
    large_value_threshold=2048,
    large_value_compression="none",
    reselect=None,
    reselect_max_qps=None,
    reselect_timeout=2_000,
    master="local[*]",
    spark_conf=(),
    spark_kafka_io="auto",
    max_offsets_per_trigger=None,
    workers=2,
    progress_interval=10_000,
    metrics_port=None,
    metrics_host="",
    log_level="info",
    log_format="text",
)


def test_every_option_of_run_has_its_field_and_no_field_is_not_an_option() -> None:
    options = {p.name for p in run.params if p.expose_value}
    assert {f.name for f in fields(RunOptions)} == options


def test_the_engine_neutral_config_holds_no_engine_s_setting() -> None:
    neutral = {f.name for f in fields(RunConfig)}
    for engine in (EmbeddedSettings, SparkSettings):
        assert not neutral & {f.name for f in fields(engine)}


def test_the_embedded_engine_gets_its_own_settings() -> None:
    settings = build_settings(OPTIONS, given={"workers", "master"})
    assert settings.engine == EmbeddedSettings(
        state_dir=Path("/var/lib/hydrator"),
        workers=2,
        workers_fit_input=False,
        commit_interval_ms=100,
        backlog_commit_interval_ms=5_000,
        startup_timeout_ms=300_000,
        state_cache_bytes=256 * 1024**2,
    )
    assert settings.engine_name == "embedded" and settings.ignored == ("master",)
    assert settings.config.kafka.properties == {"client.id": "x"}
    assert settings.config.log_level == "INFO"


def test_the_spark_engine_gets_its_own_settings() -> None:
    options = replace(OPTIONS, engine="spark", state_dir="s3a://bucket/state")
    settings = build_settings(options, given={"workers", "commit_interval"})
    assert settings.engine == SparkSettings(state_dir="s3a://bucket/state", trigger_interval_ms=100)
    assert settings.engine_name == "spark" and settings.ignored == ("workers",)
    assert build_settings(options).engine == SparkSettings(state_dir="s3a://bucket/state")


def test_what_each_engine_ignores_is_an_option_of_the_other() -> None:
    options = {f.name for f in fields(RunOptions)}
    assert set(EMBEDDED_ONLY) <= options and set(SPARK_ONLY) <= options


def test_a_state_dir_uri_is_the_spark_engine_s_only() -> None:
    with pytest.raises(ConfigError) as raised:
        build_settings(replace(OPTIONS, state_dir="s3a://bucket/state"))
    assert raised.value.options == ("--state-dir",)
