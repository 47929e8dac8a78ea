"""The Spark driver's watch on the topics a query reads (engines/spark/topic_watch.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException

from hydrator.engines.spark.topic_watch import TopicWatch


def _watch(answers: list[list[str] | KafkaException]) -> tuple[TopicWatch, threading.Event]:
    """A watch whose looks at the broker answer `answers` in turn, then nothing missing."""
    stopped = threading.Event()

    def missing(topics: Sequence[str]) -> list[str]:
        answer = answers.pop(0) if answers else []
        if isinstance(answer, KafkaException):
            raise answer
        return answer

    return TopicWatch(["in", "handoff"], missing, stopped.set, interval_s=0.01), stopped


def test_a_topic_missing_at_two_looks_in_a_row_stops_the_query_naming_it() -> None:
    watch, stopped = _watch([[], ["in"], ["in"]])
    watch.start()
    assert stopped.wait(5)
    watch.stop()
    assert watch.gone == ["in"]


def test_a_topic_missing_at_one_look_only_or_an_unanswered_look_stops_nothing() -> None:
    unanswered = KafkaException(KafkaError(KafkaError._TRANSPORT))
    watch, stopped = _watch([["in"], [], ["handoff"], unanswered, [], ["in"]])
    watch.start()
    assert not stopped.wait(0.5)
    watch.stop()
    assert watch.gone == []
