"""The Spark engine's Kafka source: a subscribed topic deleted while the query reads it fails the
query naming the topic, instead of being left behind silently at its last offsets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pyspark.sql.streaming.datasource import ReadAllAvailable

from hydrator.engines.spark.kafka_source import KafkaStreamReader
from tests.harness.cdc_events import ToastTable
from tests.harness.hydrator_process import HydratorProcess, run_args
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce

pytestmark = pytest.mark.integration


def test_a_deleted_topic_fails_the_next_trigger_naming_it(
    kafka_broker: Broker, unique_name: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    deleted, kept = f"{unique_name}.items", f"{unique_name}-handoff"
    create_topic(bootstrap, deleted, 2)
    create_topic(bootstrap, kept, 2)
    produce(bootstrap, deleted, list(ToastTable().workload(keys=4, updates_per_key=2)))
    reader = KafkaStreamReader(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topics": f"{deleted},{kept}",
            "startingOffsets": "earliest",
        }
    )
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert sum(end[deleted].values()) > 0

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([deleted])[deleted].result(30)

    with pytest.raises(KafkaException, match=rf"topic {deleted} no longer exists"):
        reader.latestOffset(end, ReadAllAvailable())


def test_the_spark_engine_stops_naming_a_deleted_input_topic(
    kafka_broker: Broker, unique_name: str, tmp_path: Path
) -> None:
    """Deleted while records keep coming: the source's and the readers' clients are fetching
    then, and librdkafka may crash their processes (docs/tansu.md) before the source can say
    what happened; the driver names the topic all the same."""
    bootstrap = kafka_broker.bootstrap_servers
    source = f"{unique_name}.items"
    create_topic(bootstrap, source, 2)
    table = ToastTable()
    produce(bootstrap, source, list(table.workload(keys=4, updates_per_key=2)))
    output = f"{source}.out"
    args = run_args(bootstrap, unique_name, [source], tmp_path / "state", output_topic=output)
    args[args.index("embedded")] = "spark"
    with HydratorProcess([*args, "--master", "local[2]"], tmp_path / "spark.log") as run:
        run.wait_for_log(r"batch \d+: ", timeout_s=300)  # the query is running
        with _producing(bootstrap, source, table):
            time.sleep(3)  # batches read what keeps arriving
        # at once, while a batch still reads (a producer would create the topic again on Tansu)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_topics([source])[source].result(30)
        code = run.wait(timeout_s=180)
    assert code == 1
    assert f"topic {source} no longer exists" in run.log


@contextmanager
def _producing(bootstrap: str, topic: str, table: ToastTable) -> Iterator[None]:
    """A record every few milliseconds to `topic` until the block ends."""
    done = threading.Event()

    def keep_producing() -> None:
        key = 100
        while not done.is_set():
            produce(bootstrap, topic, [table.insert(key)])
            key += 1
            time.sleep(0.02)

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        yield
    finally:
        done.set()
        producer.join(30)
