"""Time as the embedded engine's timers count it: processing time, and the catch-up gate.

Handoff timeouts, tombstone retention and `--state-ttl` say how long the engine waits *while it
runs*. Counted in wall time, a restart after an outage longer than a timeout would fire it at
once, before the engine has read the handoff or the delete that arrived meanwhile. So each task
has a `ProcessingClock` that advances only while a process runs the task: its reading is saved
with every commit that dates state (a meta record in the task's changelog partition and local
store), and a task opened later resumes from the saved reading, not from the wall clock.

And a task fires no timer until it has read its partitions of the inputs and of the handoff topic
up to the ends they had when it was assigned (`CatchUp`): whatever was waiting in them must be
processed before anything times out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import TopicPartition

from state.layout import CLOCK_KEY, decode_reading, encode_reading

# The changelog and store key of a task's clock reading, and its bytes: state/layout.py.
__all__ = ["CLOCK_KEY", "CatchUp", "ProcessingClock", "decode_reading", "encode_reading"]


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ProcessingClock:
    """Milliseconds that advance only while this process runs: from `start_ms` (a saved reading,
    else the wall clock: states written before the clock existed are dated in wall time), by the
    monotonic clock, from the first reading on (a restore that precedes processing is not
    counted). It never runs backwards."""

    def __init__(self, start_ms: int | None) -> None:
        self._start_ms = start_ms if start_ms is not None else wall_ms()
        self._anchor_ms: int | None = None

    def now_ms(self) -> int:
        if self._anchor_ms is None:
            self._anchor_ms = _monotonic_ms()
            return self._start_ms
        return self._start_ms + (_monotonic_ms() - self._anchor_ms)


class CatchUp:
    """A task's timers wait until the consumer has read each of its partitions up to the end it
    had when the task was assigned. Partitions with nothing to read between where the consumer
    starts (the committed offset, else the low watermark) and that end are done from the start:
    a consumer that reads nothing from a partition never reports a position in it."""

    def __init__(
        self, bounds: Mapping[tuple[str, int], tuple[int, int]], committed: Mapping[str, int]
    ) -> None:
        """`bounds`: (low watermark, end) of each partition; `committed`: the group's committed
        offset of each topic's partition."""
        self._targets = {
            (topic, partition): end
            for (topic, partition), (low, end) in bounds.items()
            if max(committed.get(topic, -1), low) < end
        }

    @property
    def done(self) -> bool:
        return not self._targets

    def pending(self) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for topic, p in self._targets]

    def advance(self, positions: Iterable[TopicPartition]) -> None:
        """Take the consumer's positions (next offset to read) into account."""
        for tp in positions:
            end = self._targets.get((tp.topic, tp.partition))
            if end is not None and tp.offset >= end:
                del self._targets[(tp.topic, tp.partition)]

    @classmethod
    def none(cls) -> CatchUp:
        return cls({}, {})
