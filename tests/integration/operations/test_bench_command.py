"""`python -m bench` end to end on a tiny workload (copy and embedded runners only), so the
benchmark command does not rot: every runner drains both backlogs, every output is checked, and
the figures come from the difference of the two runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.kafka import Broker

pytestmark = pytest.mark.integration


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_bench_measures_and_checks_the_copy_and_the_engine(
    kafka_broker: Broker, tmp_path: Path
) -> None:
    out = tmp_path / "bench.json"
    done = _bench(
        *("--events", "2000", "--keys", "60", "--small-events", "200"),
        *("--row-bytes", "300", "--toast-bytes", "1000"),
        *("--runners", "core,copy,embedded,embedded-w1"),
        *("--bootstrap-servers", kafka_broker.bootstrap_servers, "--json", str(out)),
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["method"] == "marginal"
    assert report["workload"]["small_events"] == 200
    rows = {row["key"]: row for row in report["results"]}
    assert set(rows) == {"core", "copy", "embedded", "embedded-w1"}
    for key, row in rows.items():
        assert row["status"] == "ok", (key, row)
        assert row["output_check"].startswith("ok"), (key, row)
    for key in ("copy", "embedded", "embedded-w1"):
        row = rows[key]
        small, large = row["runs"]
        assert (small["events"], large["events"]) == (200, 2000), (key, row)
        assert small["output_check"].startswith("ok") and large["output_check"].startswith("ok")
        assert small["wall_s"] > 0 and small["cpu_s"] > 0, (key, row)
        # on a loaded machine the difference can drown: then no figure, and a note says so
        if row["events_per_s"] is None:
            assert any("more --events" in note for note in row["notes"]), (key, row)
        else:
            added_s = large["wall_s"] - small["wall_s"]
            assert row["events_per_s"] == round(1800 / added_s), (key, row)
            cpu_us = (large["cpu_s"] - small["cpu_s"]) / 1800 * 1e6
            assert abs(row["cpu_us_per_event"] - cpu_us) < 0.1, (key, row)
    assert rows["copy"]["output_check"] == "ok (count only)"
    assert rows["embedded"]["output_records"] >= 2000
    assert rows["embedded"]["state_bytes_per_event"] > 0
    assert rows["embedded"]["peak_rss_mb"] > 0
    # the engine's process tree: its workers' CPU is in it, so more than the copy's
    assert rows["embedded"]["runs"][1]["cpu_s"] > rows["copy"]["runs"][1]["cpu_s"]
    assert rows["embedded-w1"]["processes"] == "1"
    assert report["machine"]["python_loop_mops"] > 0  # runs of other days compare by it
    assert "M loop steps/s" in done.stdout
    assert "| embedded engine, EOS, default workers |" in done.stdout
    assert "| events/s, default workers / the copy limit |" in done.stdout
    assert "(N2 - N1) / (T2 - T1)" in done.stdout


@pytest.mark.skipif(shutil.which("perf") is None, reason="Linux perf is not installed")
def test_the_perf_profile_shows_every_thread_of_the_engine(
    kafka_broker: Broker, tmp_path: Path
) -> None:
    out = tmp_path / "engine.perf.data"
    done = _bench(
        *("profile", "--perf", "--events", "3000", "--keys", "300"),
        *("--row-bytes", "300", "--toast-bytes", "2000"),
        *("--bootstrap-servers", kafka_broker.bootstrap_servers, "--out", str(out)),
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert out.stat().st_size > 0
    assert "hydrator run --workers 1 over 3,000 events" in done.stdout
    # the engine's own threads, named as the process is (python, or the script's name)
    own_threads = re.search(r"\| Python threads \([\w.]+\) \| Python interpreter \|", done.stdout)
    assert own_threads, done.stdout
    # librdkafka's threads, which no Python profiler sees: it names them rdk:<something>
    assert "librdkafka broker threads" in done.stdout or "| rdk:" in done.stdout
