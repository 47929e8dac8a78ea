"""`python -m bench` end to end on a tiny workload (copy and embedded runners only), so the
benchmark command does not rot: every row measured, every output checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.kafka import Broker

pytestmark = pytest.mark.integration


def test_bench_measures_and_checks_the_copy_and_the_engine(
    kafka_broker: Broker, tmp_path: Path
) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--events",
            "600",
            "--keys",
            "60",
            "--row-bytes",
            "300",
            "--toast-bytes",
            "1000",
            "--runners",
            "core,copy,embedded",
            "--bootstrap-servers",
            kafka_broker.bootstrap_servers,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {row["key"]: row for row in report["results"]}
    assert set(rows) == {"core", "copy", "embedded"}
    for key, row in rows.items():
        assert row["status"] == "ok", (key, row)
        assert row["output_check"].startswith("ok"), (key, row)
        # the copy's window can be a millisecond or two: its CPU in it may round to 0
        assert row["events_per_s"] > 0 and row["cpu_us_per_event"] >= 0, (key, row)
    assert rows["copy"]["output_check"] == "ok (count only)"
    assert rows["copy"]["ratio_to_copy"] == 1.0
    assert rows["embedded"]["output_records"] >= 600
    assert rows["embedded"]["rate_method"] == "record timestamps"
    assert rows["embedded"]["state_bytes_per_event"] > 0
    assert report["machine"]["python_loop_mops"] > 0  # runs of other days compare by it
    assert "M loop steps/s" in done.stdout
    assert rows["embedded"]["cpu_us_per_event"] > 0
    assert rows["embedded"]["peak_rss_mb"] > 0
    assert "| embedded engine, EOS, default workers |" in done.stdout
