"""Handoffs between the tasks of one process, applied in the batch that made them.

A key change's handoff goes to the task that owns the new key. Through the handoff topic it is
read back only once the batch that wrote it has committed, so each hop of a chain of key changes
(a row's key changed again and again while the engine was behind) waits one commit interval:
after an outage with long batches, a chain of a few hops outlasted `--handoff-timeout` and its
last CREATE came out unresolved. When this process owns the new key's task too, the handoff is
applied at once instead: both tasks' state changes commit in the same transaction, as a handoff
within one task always did, so a crash redoes both or neither. Only hops between processes (other
instances, other `--workers`) still travel through the topic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Protocol

from hydrator.core.reselected import Reselected
from state.handoff import Handoff


class HandoffReceiver(Protocol):
    def now_ms(self) -> int: ...

    def apply_handoff(
        self, handoff: Handoff, now_ms: int, reselected: Mapping[str, Reselected] | None = None
    ) -> None: ...


class LocalHandoffs:
    """The queue of handoffs whose new key a task of this process owns. `tasks` is the live map
    of the tasks the process owns now (partition -> task): it is read at each handoff, so tasks
    assigned or revoked later are seen as they come and go."""

    def __init__(self, tasks: Mapping[int, HandoffReceiver]) -> None:
        self._tasks = tasks
        self._queue: deque[tuple[int, Handoff]] = deque()
        # With --reselect: what the batch's re-select step read for the records a handoff
        # releases (reselect_step.py), by record source; the loop sets it for each batch.
        self.reselected: Mapping[str, Reselected] = {}

    def owns(self, partition: int) -> bool:
        return partition in self._tasks

    def put(self, partition: int, handoff: Handoff) -> None:
        self._queue.append((partition, handoff))

    def drain(self) -> None:
        """Apply what is queued, in order. A queue, not recursion: a record a handoff releases can
        itself be a key change, whose handoff joins the queue."""
        queue = self._queue
        while queue:
            partition, handoff = queue.popleft()
            task = self._tasks[partition]
            task.apply_handoff(handoff, task.now_ms(), self.reselected)
