"""Log lines (text and JSON), the secrets they never show, and when a counter's rise warns."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from hydrator.metrics.jumps import JumpWatch
from hydrator.ops.logs import JsonFormatter, TextFormatter
from hydrator.secrets import (
    is_secret_name,
    mask_item,
    mask_urls,
    redact,
    secret_values,
)


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("hydrator.progress", logging.INFO, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


# -- secrets -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "sasl.password",
        "sasl.username",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
        "consumer.sasl.password",
        "admin.ssl.key.location",
        "client.secret",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.ssl.keyPassword",
        "SASL.PASSWORD",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["security.protocol", "ssl.ca.location", "linger.ms", "consumer.fetch.max.bytes", "spark.a"],
)
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("SASL_SSL://svc:pw1@k:9093", "SASL_SSL://svc:***@k:9093"),
        ("postgres://u:p@ss@db/x", "postgres://u:***@db/x"),
        ("a://u:one@h1:1,b://v:two@h2:2", "a://u:***@h1:1,b://v:***@h2:2"),
        ("spark://head:7077", "spark://head:7077"),
        ("s3a://bucket/path", "s3a://bucket/path"),
        ("https://user@host/", "https://user@host/"),
    ],
)
def test_url_passwords_are_masked(text: str, masked: str) -> None:
    assert mask_urls(text) == masked


def test_items_mask_by_name_and_url() -> None:
    assert mask_item("sasl.password=x y") == "sasl.password=***"
    assert mask_item("sasl.oauthbearer.token.endpoint.url=https://a:b@c") == (
        "sasl.oauthbearer.token.endpoint.url=***"
    )
    assert mask_item("ssl.endpoint.identification.algorithm=none") == (
        "ssl.endpoint.identification.algorithm=none"
    )
    assert mask_item("no-equals-sign-maybe-a-password") == "***"


def test_secret_values_are_the_secrets_and_url_passwords() -> None:
    found = secret_values(
        {"sasl.password": "hunter22", "linger.ms": "5", "ssl.key.password": "abc"},
        ["SASL_SSL://svc:pw-in-url@k:1"],
    )
    assert found == {"hunter22", "pw-in-url"}  # "abc": too short to look for in free text


def test_a_secret_containing_another_is_removed_whole() -> None:
    assert redact("x longsecret-part y secret-p", {"secret-p", "longsecret-part"}) == (
        "x *** y ***"
    )


# -- formats -------------------------------------------------------------------------------------

SECRET = 'pa"ss\\word 1'


def test_text_lines_keep_their_format_and_lose_secrets() -> None:
    line = TextFormatter([SECRET]).format(record("connect with %s", SECRET))
    assert line.endswith("INFO hydrator.progress: connect with ***")


def test_json_lines_carry_level_logger_message_app_id_and_counts() -> None:
    counts = {"records": 12, "dead_letters": 1}
    line = JsonFormatter("orders", [SECRET]).format(
        record("%d records", 12, counts=counts, lag={"t": 3})
    )
    entry = json.loads(line)
    assert entry["level"] == "INFO"
    assert entry["logger"] == "hydrator.progress"
    assert entry["message"] == "12 records"
    assert entry["application_id"] == "orders"
    assert entry["counts"] == counts and entry["lag"] == {"t": 3}
    assert entry["time"].endswith("+00:00")


def test_json_lines_lose_secrets_even_escaped_and_in_tracebacks() -> None:
    formatter = JsonFormatter("app", [SECRET])
    try:
        raise ValueError(f"bad value {SECRET}")
    except ValueError:
        failed = record("failed: %s", SECRET, detail={"why": SECRET})
        failed.exc_info = sys.exc_info()
    line = formatter.format(failed)
    assert 'pa\\"ss' not in line and SECRET not in line and "word 1" not in line
    entry = json.loads(line)
    assert entry["message"] == "failed: ***"
    assert entry["detail"] == {"why": "***"}
    assert "ValueError: bad value ***" in entry["exception"]


# -- jumps ---------------------------------------------------------------------------------------


def test_a_first_burst_warns_a_steady_rate_does_not_and_a_doubling_does() -> None:
    watch = JumpWatch()
    assert watch.check({"dead_letters": 0}, 1000) == []
    (burst,) = watch.check({"dead_letters": 50}, 2000)  # 5% of the interval, 0% before
    assert (burst.counter, burst.rise, burst.records) == ("dead_letters", 50, 1000)
    assert watch.check({"dead_letters": 100}, 3000) == []  # 5% again: steady
    assert watch.check({"dead_letters": 160}, 4000) == []  # 6%: a climb, not twice 5%
    assert watch.check({"dead_letters": 240}, 5000) == []  # 8%: not twice 6%
    (doubled,) = watch.check({"dead_letters": 400}, 6000)  # 16% vs 8%
    assert "dead letters jumped: +160 over 1000 records (16.0%; 8.0% before)" in (
        doubled.describe()
    )


def test_small_rises_never_warn() -> None:
    watch = JumpWatch()
    for step in range(1, 20):
        assert watch.check({"unresolved_events": 9 * step}, 10 * step) == []


def test_a_rise_without_records_warns_and_a_restart_starts_from_the_totals() -> None:
    watch = JumpWatch({"unresolved_events": 100}, 10_000)
    assert watch.check({"unresolved_events": 100}, 10_000) == []
    (timeouts,) = watch.check({"unresolved_events": 130}, 10_000)  # handoff timeouts firing
    assert timeouts.records == 0 and timeouts.rise == 30
