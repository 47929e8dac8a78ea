"""`hydrator state inspect|stats` on the stores a real embedded run wrote over the broker: beside
the running instance (read-only, no lock taken) and after it stopped. The run logs in JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from hydrator.kafka.partitioner import partition_for_key
from tests.harness.cdc_events import (
    NEW_KEY_HEADER,
    OLD_KEY_HEADER,
    PLACEHOLDER,
    ToastTable,
    envelope,
    key_bytes,
)
from tests.harness.hydrator_process import HydratorProcess, run_args
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce

pytestmark = pytest.mark.integration

PARTITIONS = 2
KEYS = 10
PARKED_NEW, PARKED_OLD = 60, 7  # a CREATE whose old key's DELETE has not arrived
WAITING_NEW, WAITING_OLD = 80, 8  # a DELETE handing its row to a key whose CREATE has not


def hydrator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hydrator.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def inspect(where: list[str], key: int, *extra: str) -> list[dict[str, Any]]:
    done = hydrator("state", "inspect", *where, "--key", json.dumps({"id": key}), *extra)
    assert done.returncode in (0, 1), done.stderr
    decoder, text, found = json.JSONDecoder(), done.stdout.strip(), []
    while text:
        document, end = decoder.raw_decode(text)
        found.append(document)
        text = text[end:].strip()
    assert (done.returncode == 0) == bool(found), done.stderr
    return found


def stats(where: list[str]) -> dict[str, Any]:
    done = hydrator("state", "stats", *where, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def workload(table: ToastTable) -> list[tuple[bytes | None, bytes | None, list]]:
    records = list(table.workload(keys=KEYS, updates_per_key=2))
    records.append(table.delete(3))
    records += table.change_key(5, 50)
    create = envelope("c", None, {"id": PARKED_NEW, "doc": PLACEHOLDER, "n": 0}, 10_000, "items")
    records.append((key_bytes(PARKED_NEW), create, [(OLD_KEY_HEADER, key_bytes(PARKED_OLD))]))
    before = {"id": WAITING_OLD, "doc": None, "n": None}
    delete = envelope("d", before, None, 10_001, "items")
    records.append((key_bytes(WAITING_OLD), delete, [(NEW_KEY_HEADER, key_bytes(WAITING_NEW))]))
    return records


def check_stores(where: list[str], table: ToastTable, source: str) -> None:
    (one,) = inspect(where, 1, "--full-values")
    assert one["topic"] == source
    assert one["partition"] == partition_for_key(key_bytes(1), PARTITIONS)
    assert one["image"] == table.rows[1]
    # by default a long value is cut, with its length
    (cut,) = inspect(where, 1)
    doc = table.rows[1]["doc"]
    assert len(doc) > 200
    assert cut["image"]["doc"] == f"{doc[:200]}… [{len(doc)} characters; --full-values shows all]"
    assert {**cut, "image": one["image"]} == one
    assert one["deleted"] is False and one["parked"] == 0
    last_lsn = max(lsn for lsn, row in table.expected_after.items() if row and row["id"] == 1)
    assert one["position"] == [last_lsn]
    assert inspect(where, 1, "--input-topic", source, "--full-values") == [one]
    assert inspect(where, 1, "--input-topic", "other.topic") == []

    (deleted,) = inspect(where, 3)
    assert deleted["deleted"] is True
    (moved,) = inspect(where, 50, "--full-values")
    assert moved["image"] == table.rows[50]
    (parked,) = inspect(where, PARKED_NEW)
    assert parked["parked"] == 1 and parked["parked_bytes"] > 0
    assert parked["awaiting"] == json.dumps({"id": PARKED_OLD}, separators=(",", ":"))
    (waiting,) = inspect(where, WAITING_NEW)
    assert waiting["waiting_handoffs"] == 1 and waiting["image"] is None
    assert inspect(where, 999) == []

    figures = stats(where)
    totals = figures["totals"]
    # keys 0..9, 50 (moved from 5), 60 (parked), 80 (a handoff waiting for its CREATE)
    assert totals["keys"] == KEYS + 3
    assert totals["tombstones"] == 3  # 3 deleted; 5 and 8 handed their rows on
    assert (totals["parked_keys"], totals["parked_records"]) == (1, 1)
    assert totals["waiting_handoffs"] == 1
    assert totals["unreadable"] == 0
    assert totals["topics"] == {source: KEYS + 3}
    assert [s["partition"] for s in figures["stores"]] == list(range(PARTITIONS))
    for name in ("keys", "bytes", "tombstones", "parked_records", "disk_bytes"):
        assert totals[name] == sum(s[name] for s in figures["stores"])
    assert totals["bytes"] > KEYS * table.doc_size

    table_text = hydrator("state", "stats", *where)
    assert table_text.returncode == 0, table_text.stderr
    assert "parked records" in table_text.stdout
    assert f"input topic {source}: {KEYS + 3} keys" in table_text.stdout


def test_state_tools_read_a_real_run_beside_the_running_instance_and_after(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, PARTITIONS)
    table = ToastTable(doc_size=500)
    records = workload(table)
    produce(bootstrap, source, records)
    state_dir = tmp_path / "state"
    where = ["--state-dir", str(state_dir), "--application-id", unique_name]
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        state_dir,
        "--handoff-timeout",
        "10m",
        "--log-format",
        "json",
        # one process: its progress line counts every record
        "--workers",
        "1",
        output_suffix=".enriched",
    )
    log_path = tmp_path / "run.log"
    with HydratorProcess(args, log_path) as running:
        # A progress line after the one that first counts every record: that batch committed.
        done = re.compile(rf'"records": {len(records)}\b')
        running.wait_for_log(done, timeout_s=90)
        deadline = time.monotonic() + 30
        while len(done.findall(running.log)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        # the stores are open in the running instance and hold the batch it committed
        check_stores(where, table, source)
        note = hydrator("state", "stats", *where).stderr
        assert f"process {running.process.pid} runs this application" in note
        assert running.terminate() == 0

    check_stores(where, table, source)
    assert "runs this application" not in hydrator("state", "stats", *where).stderr
    # the run's own config file tells the tools where to look; its other keys are ignored
    config = tmp_path / "run.toml"
    config.write_text(
        f'[run]\nstate-dir = "{state_dir}"\napplication-id = "{unique_name}"\n'
        f'bootstrap-servers = "{bootstrap}"\ninput-topic = ["{source}"]\nformat = "debezium"\n'
        'kafka-property = ["linger.ms=5"]\n'
    )
    check_stores(["--config", str(config)], table, source)

    lines = [orjson.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    assert all(line["application_id"] == unique_name for line in lines)
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    progress = [line for line in lines if line["logger"] == "hydrator.progress"]
    assert progress and all(line["level"] == "INFO" for line in progress)
    assert progress[-1]["counts"]["records"] == len(records)
    assert progress[-1]["parked_keys"] == 1


def test_state_tools_refuse_what_they_cannot_read(tmp_path: Path) -> None:
    missing = hydrator("state", "stats", "--state-dir", str(tmp_path), "--application-id", "x")
    assert missing.returncode == 2 and "--state-dir" in missing.stderr
    spark = hydrator("state", "inspect", "--engine", "spark", "--key", '{"id": 1}')
    assert spark.returncode == 2 and "checkpoint" in spark.stderr
    (tmp_path / "x" / "x-state-0").mkdir(parents=True)
    bad_key = hydrator(
        "state", "inspect", "--state-dir", str(tmp_path), "--application-id", "x", "--key", "{id"
    )
    assert bad_key.returncode == 2 and "--key" in bad_key.stderr
    config = tmp_path / "run.toml"
    config.write_text('state-dir = "x"\nhandof-timeout = "5s"\n')
    misspelt = hydrator("state", "stats", "--config", str(config))
    # a key no option reads is warned about, naming it and what it may have meant; the rest of
    # the file still applies (here: a state directory that holds no state)
    assert "ignoring handof-timeout (did you mean handoff-timeout?)" in misspelt.stderr
    assert misspelt.returncode == 2 and "no embedded-engine state at x" in misspelt.stderr
