"""An input (or handoff) topic deleted while the engine runs stops it with an error naming the
topic (exit 2, as at start-up), instead of a warning per poll and a half-assigned group."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from hydrator.engines.embedded.loop import StreamLoop
from hydrator.engines.embedded.topics import TopologyError, check_topic_error
from hydrator.topology.layout import Topology

TOPOLOGY = Topology("app", {"db.orders": "db.orders.out"}, 2)


class ErrorMessage:
    def __init__(self, topic: str, code: int) -> None:
        self._topic, self._error = topic, KafkaError(code)

    def error(self) -> KafkaError:
        return self._error

    def topic(self) -> str:
        return self._topic


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC])
def test_a_deleted_input_topic_is_named(code: int) -> None:
    with pytest.raises(TopologyError, match=r"--input-topic db\.orders: .*no longer exists"):
        check_topic_error(TOPOLOGY, "db.orders", KafkaError(code))


def test_a_deleted_handoff_topic_is_named() -> None:
    with pytest.raises(TopologyError, match=r"--application-id: .*app-handoff"):
        check_topic_error(TOPOLOGY, "app-handoff", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


def test_other_consumer_errors_are_only_logged() -> None:
    check_topic_error(TOPOLOGY, "db.orders", KafkaError(KafkaError._TRANSPORT))
    check_topic_error(TOPOLOGY, "elsewhere", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    check_topic_error(TOPOLOGY, None, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


def test_the_loop_stops_on_the_consumer_error() -> None:
    loop = StreamLoop.__new__(StreamLoop)  # only the error path of _dispatch is exercised
    loop._parts = SimpleNamespace(topology=TOPOLOGY)  # type: ignore[assignment]
    message = ErrorMessage("db.orders", KafkaError.UNKNOWN_TOPIC_OR_PART)
    with pytest.raises(TopologyError, match=r"db\.orders"):
        loop._dispatch(message)  # type: ignore[arg-type]
