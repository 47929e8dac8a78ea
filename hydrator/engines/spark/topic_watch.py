"""The driver's watch on the topics a query reads: one deleted while it runs stops the query, so
that the run ends naming the topic within seconds. Spark's Kafka connector does not fail then by
itself until its consumers' timeouts run out (a minute or more per fetch and per retry)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaException

log = logging.getLogger("hydrator.spark")
# Between two looks at the broker's topic list: one metadata request.
WATCH_INTERVAL_S = 2.0


class TopicWatch:
    """Looks every `interval_s` for the topics in `topics` that no longer exist
    (`missing(topics)`); one missing at two looks in a row (not a broker's passing state while
    it starts) is remembered in `gone`, and `stop()` is called."""

    def __init__(
        self,
        topics: Sequence[str],
        missing: Callable[[Sequence[str]], list[str]],
        stop: Callable[[], None],
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        self._topics = list(topics)
        self._missing = missing
        self._stop = stop
        self._interval_s = interval_s
        self._done = threading.Event()
        self.gone: list[str] = []
        self._thread = threading.Thread(target=self._watch, name="topic-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _watch(self) -> None:
        seen: set[str] = set()
        while not self._done.wait(self._interval_s):
            try:
                missing = self._missing(self._topics)
            except KafkaException:
                continue  # the broker does not answer now: the query meets that itself
            gone = [name for name in missing if name in seen]
            seen = set(missing)
            if gone:
                self.gone = gone
                log.error("topic %s was deleted while the query read it: stopping", gone[0])
                self._stop()
                return
