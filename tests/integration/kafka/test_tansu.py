"""What docs/tansu.md and docs/guarantees.md say of Tansu, the broker `hydrator demo` and
`hydrator dev broker` give users, checked on a Tansu of the module's own whatever broker the
rest of the suite runs on: should a Tansu release change one of these, the docs and the
workarounds in hydrator/kafka/broker_quirks.py must change with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from hydrator.demo.stream import DemoStream
from hydrator.kafka.local_broker import LocalBroker
from tests.harness.exactly_once import app_repeats
from tests.harness.faulty_engine import DIE_WITH_STATE_KEYS, EXIT_CODE
from tests.harness.hydrator_process import run_args, run_to_completion
from tests.harness.kafka import TANSU, Broker
from tests.harness.stream_checks import check_hydrated, copies_by_source
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.tansu]


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with LocalBroker(log_path=log) as broker:
        yield Broker(broker.bootstrap_servers, TANSU, log)


def _topic(tansu: Broker, partitions: int = 1) -> str:
    name = f"tansu-{uuid.uuid4().hex[:8]}"
    create_topic(tansu.bootstrap_servers, name, partitions)
    return name


def test_an_aborted_transactions_flushed_records_stay_visible(tansu: Broker) -> None:
    topic = _topic(tansu)
    producer = Producer(
        {"bootstrap.servers": tansu.bootstrap_servers, "transactional.id": f"{topic}-t"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted")
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    values = [r.value for r in read_topic(tansu.bootstrap_servers, topic)]
    assert values == [b"aborted"], "Tansu now hides aborted records: update docs/tansu.md"


def test_a_dead_producers_records_stay_visible_once_its_id_is_initialised_again(
    tansu: Broker,
) -> None:
    topic = _topic(tansu)
    settings = {"bootstrap.servers": tansu.bootstrap_servers, "transactional.id": f"{topic}-t"}
    dead = Producer(settings)
    dead.init_transactions(30)
    dead.begin_transaction()
    dead.produce(topic, b"dead")
    assert dead.flush(30) == 0
    Producer(settings).init_transactions(30)  # what a restarted instance does
    values = [r.value for r in read_topic(tansu.bootstrap_servers, topic)]
    assert values == [b"dead"], "Tansu now hides a dead transaction: update docs/tansu.md"


def test_list_offsets_answers_the_last_batchs_base_offset_plus_one(tansu: Broker) -> None:
    topic = _topic(tansu)
    producer = Producer({"bootstrap.servers": tansu.bootstrap_servers, "linger.ms": 100})
    for batch in range(2):
        for i in range(3):
            producer.produce(topic, f"{batch}-{i}".encode(), partition=0)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": tansu.bootstrap_servers, "group.id": topic})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10, cached=False)
    finally:
        consumer.close()
    assert high == 4, f"ListOffsets(latest) = {high}, 6 records in two batches of 3"


def test_describe_configs_names_no_broker_default(tansu: Broker) -> None:
    topic = _topic(tansu)
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap_servers})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert "max.message.bytes" not in future.result(30)


def test_asking_for_one_topics_metadata_creates_it(tansu: Broker) -> None:
    name = f"tansu-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap_servers})
    admin.list_topics(name, timeout=10)
    assert name in admin.list_topics(timeout=10).topics


def test_a_crash_repeats_outputs_there_as_identical_copies(tansu: Broker, tmp_path: Path) -> None:
    """The embedded engine dies right after a commit delivered its outputs, before its offsets;
    the next run writes that batch again. On Tansu both copies stay visible: identical, the
    same `hydrator.source`, nothing lost."""
    bootstrap = tansu.bootstrap_servers
    app = f"tansu-app-{uuid.uuid4().hex[:8]}"
    source, output = f"{app}.items", f"{app}.out"
    create_topic(bootstrap, source, 2)
    records = DemoStream(seed=5, keys=50, toast_size=100).records(400)
    placed = produce(bootstrap, source, [(r.key, r.value, list(r.headers)) for r in records])
    args = run_args(bootstrap, app, [source], tmp_path / "state", "--workers", "1")
    args += ["--output-topic", output]
    dying = subprocess.run(
        [sys.executable, "-m", "tests.harness.faulty_engine", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, DIE_WITH_STATE_KEYS: ""},
    )
    assert dying.returncode == EXIT_CODE, dying.stderr
    done = run_to_completion([*args, "--available-now"], timeout_s=120)
    assert done.returncode == 0, done.stderr

    outputs = read_topic(bootstrap, output)
    truth, copies = copies_by_source(outputs, records, placed, source)
    for src, outs in copies.items():
        check_hydrated(src, outs[0], truth[src])
    repeated = app_repeats(tansu, app, [output])  # identical copies only, on Tansu
    assert repeated > 0, "Tansu now hides a dead transaction: update docs/tansu.md"
