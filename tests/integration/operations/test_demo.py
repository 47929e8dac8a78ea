"""`hydrator demo` as a user runs it: a subprocess that starts its own broker and exits 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hydrator.demo.feeds import FEEDS

pytestmark = pytest.mark.integration

COUNTS = re.compile(
    r"^events (\d+) \| filled columns (\d+) \| unresolved (\d+) \| DLQ (\d+)$", re.MULTILINE
)


@pytest.mark.parametrize("envelope", ["--no-schemas", "--schemas"])
def test_demo_with_a_generated_stream(envelope: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hydrator.cli",
            "demo",
            "--source",
            "generated",
            "--events",
            "400",
            envelope,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "140"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    match = COUNTS.search(done.stdout)
    assert match, done.stdout
    events, filled, unresolved, dead = map(int, match.groups())
    assert events >= 400
    assert filled > events  # most events carry several placeholders
    assert (unresolved, dead) == (0, 0)
    assert (
        f"checked {events} enriched records against the REPLICA IDENTITY FULL truth: "
        "all equal" in done.stdout
    )
    for shown in ("An UPDATE", "A primary-key change", "A DELETE", "<- filled"):
        assert shown in done.stdout


# What each generated feed's demo must show: the titles of its telling records, and what the
# enriched side adds there.
FEED_SHOWS = {
    "cockroachdb": ("An UPDATE", "A DELETE", "before.status", "<- added"),
    "ydb": ("An UPDATE", "A REPLACE", "A DELETE", "newImage.plan", "oldImage.name", "<- added"),
    "cassandra": ("An UPDATE", "another replica", '"set":false}  <- filled'),
}


@pytest.mark.parametrize("source", sorted(FEEDS))
def test_demo_with_a_generated_feed_of_another_source(source: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hydrator.cli", "demo", "--source", source, "--events", "300"],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "140"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    match = COUNTS.search(done.stdout)
    assert match, done.stdout
    events, _, unresolved, dead = map(int, match.groups())
    assert events >= 300
    assert (unresolved, dead) == (0, 0)
    checked = re.search(
        r"^checked (\d+) enriched records against .*: all equal$", done.stdout, re.M
    )
    assert checked, done.stdout
    assert 0 < int(checked.group(1)) <= events
    for shown in FEED_SHOWS[source]:
        assert shown in done.stdout, shown


@pytest.mark.parametrize("source", ["cockroachdb", "avro"])
def test_schemas_with_a_source_that_has_no_schema_envelope_is_a_usage_error(source: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hydrator.cli", "demo", "--source", source, "--schemas"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--schemas" in done.stderr


def _without_java() -> dict[str, str]:
    """The environment of a machine without Java: the demo falls back to the generated stream."""
    return {**os.environ, "PATH": str(Path(sys.executable).parent)}


@pytest.mark.parametrize("debezium", ["real", "generated"])
def test_demo_with_avro_and_the_demos_schema_registry(debezium: str) -> None:
    """`hydrator demo --source avro`: real Debezium through Kafka Connect's AvroConverter (or,
    without Java, the generated stream in the same framing), the demo's in-memory registry,
    every enriched record checked against the full rows and its input's schema id."""
    from hydrator.demo.debezium import unavailable_reason

    if debezium == "real" and (reason := unavailable_reason()) is not None:
        pytest.skip(f"real Debezium cannot run here: {reason}")
    done = subprocess.run(
        [sys.executable, "-m", "hydrator.cli", "demo", "--source", "avro", "--events", "300"],
        capture_output=True,
        text=True,
        timeout=240,
        env={
            **(os.environ if debezium == "real" else _without_java()),
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "140",
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    source = "real Debezium" if debezium == "real" else "a generated Debezium Postgres stream"
    assert f"source: {source}" in done.stdout
    assert "schema registry: the demo's in-memory Confluent-compatible one" in done.stdout
    match = COUNTS.search(done.stdout)
    assert match, done.stdout
    events, filled, unresolved, dead = map(int, match.groups())
    assert events >= 300 and filled > events
    assert (unresolved, dead) == (0, 0)
    assert "every enriched value framed with its input's schema id" in done.stdout
    assert (
        f"checked {events} enriched records against the REPLICA IDENTITY FULL truth: "
        "all equal" in done.stdout
    )
    for shown in ("An UPDATE", "A primary-key change", "A DELETE", "<- filled"):
        assert shown in done.stdout
    assert "DeprecationWarning" not in done.stderr, done.stderr


# A run that works shows no ERROR line and no traceback (issue 43). A Kafka client the demo left
# alive past its broker logged `FAIL ... Disconnected` at exit, and only when the process was
# slow to end after the broker stopped: the demo here waits 3 s after stopping its broker, as a
# loaded machine's exit may, so that a client left behind is caught every time.
_LINGERING_DEMO = """
import sys, time
from hydrator.kafka import local_broker
stop = local_broker.LocalBroker.stop
def stop_and_linger(self, *args, **kwargs):
    stop(self, *args, **kwargs)
    time.sleep(3)
local_broker.LocalBroker.stop = stop_and_linger
from hydrator.cli import main
sys.argv = ["hydrator", *sys.argv[1:]]
main()
"""
QUIET_BREAKERS = ("ERROR", "Traceback", "|FAIL|", "%3|", "Failed to consume", "Exception")


@pytest.mark.parametrize("source", ["debezium", "generated", "avro"])
def test_a_good_demo_run_prints_no_error_line_and_no_traceback(source: str) -> None:
    from hydrator.demo.debezium import unavailable_reason

    if source == "debezium" and (reason := unavailable_reason()) is not None:
        pytest.skip(f"real Debezium cannot run here: {reason}")
    done = subprocess.run(
        [sys.executable, "-c", _LINGERING_DEMO, "demo", "--source", source, "--events", "300"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "140"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all equal" in done.stdout
    for breaker in QUIET_BREAKERS:
        assert breaker not in done.stdout + done.stderr, done.stderr
