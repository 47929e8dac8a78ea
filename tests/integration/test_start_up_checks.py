"""Start-up checks that come before anything is created on the broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce

pytestmark = pytest.mark.integration


def topic_names(bootstrap: str) -> set[str]:
    # all topics: asking for one by name would create it on Tansu
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_an_unwritable_state_dir_is_exit_2_before_any_topic_is_created(
    kafka_broker: Broker, unique_name: str, tmp_path: Path, engine: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, output = f"{unique_name}.items", f"{unique_name}.out"
    create_topic(bootstrap, source, 1)
    produce(bootstrap, source, [ToastTable().insert(1)])
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    args = run_args(
        bootstrap, unique_name, [source], blocker / "state", "--available-now", output_topic=output
    )
    args[args.index("embedded")] = engine
    done = run_to_completion(args, timeout_s=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "--state-dir" in done.stderr
    assert "Traceback" not in done.stderr
    created = {output, f"{unique_name}-handoff", f"{unique_name}-state", f"{unique_name}-dlq"}
    assert not created & topic_names(bootstrap)
