"""Where a new application id starts reading a topic that already holds records
(docs/cold-start.md, deploying onto a live topic): from each partition's first retained record
by default; from the end with `-X consumer.auto.offset.reset=latest`, and then on from its own
committed offsets like any run."""

from __future__ import annotations

import json

import pytest

from tests.harness.hydrator_process import App, run_to_completion
from tests.harness.topics import produce, read_topic

pytestmark = pytest.mark.integration


def _events(ids: range) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [
        (
            json.dumps({"id": i}).encode(),
            json.dumps(
                {"before": None, "after": {"id": i, "v": "x"}, "op": "c", "source": {}}
            ).encode(),
            [],
        )
        for i in ids
    ]


def _run(app: App, *extra: str) -> str:
    done = run_to_completion(
        app.run_args("--available-now", "--workers", "1", *extra, output_suffix=".enriched"),
        timeout_s=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def _enriched_ids(app: App) -> list[int]:
    return [
        json.loads(r.value)["after"]["id"]
        for r in read_topic(app.bootstrap, f"{app.source}.enriched")
    ]


def test_a_new_application_reads_an_existing_topic_from_its_start(app: App) -> None:
    app.create_source(2)
    produce(app.bootstrap, app.source, _events(range(6)), partitions=[0, 1] * 3)
    _run(app)
    assert sorted(_enriched_ids(app)) == list(range(6))


def test_offset_reset_latest_starts_a_new_application_at_the_end(app: App) -> None:
    app.create_source(2)
    produce(app.bootstrap, app.source, _events(range(6)), partitions=[0, 1] * 3)
    latest = ("-X", "consumer.auto.offset.reset=latest")
    log = _run(app, *latest)
    assert "records 0, commits" in log, log[-2000:]
    assert _enriched_ids(app) == []
    # what arrives after the first run is read, from the offsets the first run committed
    produce(app.bootstrap, app.source, _events(range(6, 9)), partitions=[0, 1, 0])
    _run(app, *latest)
    assert sorted(_enriched_ids(app)) == [6, 7, 8]
