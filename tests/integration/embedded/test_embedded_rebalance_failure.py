"""A Kafka call that fails inside a rebalance callback (docs/architecture.md, failures): the
assignment's probe of the partitions' ends meets a partition without a leader yet (a topic just
created, a broker under load). librdkafka runs the callback inside `poll`, and confluent-kafka
hands a client error raised there out of `poll` as a bare KafkaError that no `except` clause
catches: the run died, whatever restarted it. The engine keeps what the callback raised and
raises it after the poll, so the in-process restart takes it like any broker failure."""

from __future__ import annotations

import inspect
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from hydrator.config import EmbeddedSettings, RunConfig
from hydrator.engines.embedded.engine import EmbeddedEngine
from hydrator.kafka.client_config import ClientSettings
from hydrator.kafka.offsets import OffsetProbe
from tests.harness.cdc_events import ToastTable
from tests.harness.kafka import Broker
from tests.harness.topics import create_topic, produce, read_topic

pytestmark = pytest.mark.integration


def test_a_client_error_in_the_assignment_restarts_the_engine(
    kafka_broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    name = f"rebalance-{uuid.uuid4().hex[:8]}"
    source = f"{name}.items"
    create_topic(bootstrap, source, 2)
    records = list(ToastTable().workload(keys=10, updates_per_key=2))
    produce(bootstrap, source, records)

    bounds = OffsetProbe.bounds
    failed: list[str] = []

    def first_fails(self: OffsetProbe, partitions: Any) -> Any:
        wanted = list(partitions)
        in_assignment = any(frame.function == "on_assign" for frame in inspect.stack())
        if not failed and in_assignment:
            failed.append(source)
            # a real client error, as librdkafka raises it (a partition it cannot place)
            self._consumer.get_watermark_offsets(TopicPartition(source, 99), 2, cached=False)
        return bounds(self, wanted)

    monkeypatch.setattr(OffsetProbe, "bounds", first_fails)
    config = RunConfig(
        kafka=ClientSettings(bootstrap),
        input_topics=(source,),
        output_suffix=".out",
        application_id=name,
        format="debezium",
        available_now=True,
    )
    engine = EmbeddedEngine(config, EmbeddedSettings(state_dir=tmp_path, workers=1))
    engine.run()

    assert failed, "the assignment's probe never ran"
    assert engine.counts["restarts"] >= 1
    assert len(read_topic(bootstrap, f"{source}.out")) == len(records)
