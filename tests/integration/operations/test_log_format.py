"""`--log-format json` on a real embedded run: every line one JSON object, and a burst of dead
letters logged as a jump warning carrying its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce

pytestmark = pytest.mark.integration

POISON = 30


def test_json_lines_and_a_dead_letter_jump_warning(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, 1)
    table = ToastTable(doc_size=100)
    good = list(table.workload(keys=10, updates_per_key=2))
    poison = [(b'{"id": %d}' % n, b"not json", []) for n in range(POISON)]
    produce(bootstrap, source, [*good, *poison])
    args = run_args(
        bootstrap,
        unique_name,
        [source],
        tmp_path / "state",
        "--available-now",
        "--log-format",
        "json",
        output_suffix=".enriched",
    )
    done = run_to_completion(args)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert all(line["application_id"] == unique_name for line in lines)
    (jump,) = [line for line in lines if line["level"] == "WARNING" and "jumped" in line["message"]]
    assert jump["counter"] == "dead_letters"
    assert jump["rise"] == POISON and jump["records"] == len(good) + POISON
    assert jump["message"].startswith(f"dead letters jumped: +{POISON} over")
    last_progress = [line for line in lines if "counts" in line][-1]
    assert (last_progress["logger"], last_progress["level"]) == ("hydrator.progress", "INFO")
    assert last_progress["counts"]["dead_letters"] == POISON
    assert last_progress["counts"]["records"] == len(good) + POISON
