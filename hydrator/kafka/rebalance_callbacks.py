"""Rebalance callbacks whose exceptions reach the caller of the poll intact.

librdkafka runs a consumer's rebalance callbacks inside `poll`/`consume`, and confluent-kafka
(2.16) raises what a callback raised from that call. When the callback's own exception came from
a consumer method (a KafkaException from `get_watermark_offsets`, say), it comes out of the poll
half-made: its value a KafkaError, not an exception, so that no `except` clause catches it, not
even `except BaseException`, and it ends the process. So the callbacks keep what they raise, and
the poll's caller raises it once the poll has returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, TopicPartition

Callback = Callable[[Consumer, list[TopicPartition]], None]


class RebalanceCallbacks:
    def __init__(self) -> None:
        self._failure: BaseException | None = None
        self._polling = False

    def guard(self, callback: Callback) -> Callback:
        """`callback` as the consumer should be given it. Outside a poll (a consumer being
        closed calls its revoke callback) what it raises is raised as it comes."""

        def call(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if not self._polling:
                callback(consumer, partitions)
            elif self._failure is None:  # else the poll's caller is about to raise the first
                try:
                    callback(consumer, partitions)
                except BaseException as exc:
                    self._failure = exc

        return call

    @contextmanager
    def polling(self) -> Iterator[None]:
        """Around a poll or consume: raises, once it returned, what a callback raised in it."""
        self._polling = True
        try:
            yield
        finally:
            self._polling = False
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
