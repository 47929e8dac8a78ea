"""Deadlines on blocking Kafka calls, and stop requests that reach a blocked main thread.

librdkafka's own timeouts are not always honoured: after a broker outage the main thread was
seen blocked in `send_offsets_to_transaction` for minutes after its 60 s timeout. Python runs
signal handlers only when the blocking C call returns, so SIGTERM did nothing either. The
watchdog is a thread that
* knows which blocking call the main thread is in (`with blocking("commit_transaction", 60):`)
  and, when one overruns its timeout by `MARGIN_S`, logs one line and ends the process with
  `EXIT_TEMPORARY` (75, EX_TEMPFAIL: "temporary failure, restart me") for the supervisor to
  restart it; a restart resumes from the last committed transaction, so nothing is lost;
* reads the signal wake-up fd: a stop signal that arrives while the main thread is inside a
  blocking call gets `STOP_GRACE_S` for the call to return (then the normal clean stop runs);
  if it does not, or a "stop now" arrives, the process ends at once with `EXIT_STOPPED` (130)
  without committing the open batch. Which signals mean what: `StopSignals`.
Outside `Watchdog.running()` (unit tests, the Spark engine) `blocking()` only marks the call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hydrator.errors import EXIT_STOPPED, EXIT_TEMPORARY

log = logging.getLogger(__name__)

# How far past its own timeout a blocking call may run before the process gives up on it.
MARGIN_S = 30.0
# After a stop request, how long a blocking call may still take before the process exits.
STOP_GRACE_S = 10.0
_TICK_S = 0.5


@dataclass(frozen=True)
class StopSignals:
    """Which signals ask a process to stop after a clean commit, and which to stop now."""

    clean: frozenset[int]
    now: frozenset[int]
    # Whether a second clean-stop signal means "now".
    repeat_means_now: bool

    def means_now(self, signum: int, already_stopping: bool) -> bool:
        return signum in self.now or (already_stopping and self.repeat_means_now)


# A process on its own: SIGINT and SIGTERM alike; a second one means now.
STANDALONE = StopSignals(frozenset({signal.SIGINT, signal.SIGTERM}), frozenset(), True)
# A worker of a supervisor (workers.py): SIGTERM is the clean stop, and may come twice (systemd
# signals every process of the service, and the supervisor passes its own on); SIGINT, which
# only the supervisor sends (a worker has its own process group), means now.
WORKER = StopSignals(frozenset({signal.SIGTERM}), frozenset({signal.SIGINT}), False)


@dataclass
class _Call:
    what: str
    started: float
    deadline: float


class Watchdog:
    def __init__(
        self,
        margin_s: float = MARGIN_S,
        stop_grace_s: float = STOP_GRACE_S,
        exit_process: Callable[[int], None] = os._exit,
    ) -> None:
        self.margin_s = margin_s
        self.stop_grace_s = stop_grace_s
        self._exit = exit_process
        self._calls: list[_Call] = []  # the main thread's open blocking calls, innermost last
        self._lock = threading.Lock()
        self._stop_requested_at: float | None = None
        self._stop_now = False
        self._signals = STANDALONE
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._wakeup: tuple[socket.socket, socket.socket] | None = None

    @contextlib.contextmanager
    def blocking(self, what: str, timeout_s: float) -> Iterator[None]:
        """Mark a blocking call that should return within `timeout_s`."""
        now = time.monotonic()
        call = _Call(what, now, now + timeout_s + self.margin_s)
        with self._lock:
            self._calls.append(call)
        try:
            yield
        finally:
            with self._lock:
                self._calls.remove(call)

    def in_call_with_time(self, now: float | None = None) -> bool:
        """Whether the main thread is in a blocking call that has not overrun its deadline (a
        liveness check: such a thread is waiting, not stuck)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return any(now <= call.deadline for call in self._calls)

    @contextlib.contextmanager
    def running(self, signals: StopSignals = STANDALONE) -> Iterator[None]:
        """Enforce the deadlines (and, on the main thread, watch for stop signals) meanwhile."""
        self._done.clear()
        self._stop_requested_at = None
        self._stop_now = False
        self._signals = signals
        previous_fd: int | None = None
        if threading.current_thread() is threading.main_thread():
            reader, writer = socket.socketpair()
            reader.setblocking(False)
            writer.setblocking(False)
            self._wakeup = (reader, writer)
            # The C-level handler writes the signal number here even while the main thread is
            # stuck in librdkafka; the Python handler runs only after the call returns.
            previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="watchdog", daemon=True)
        self._thread.start()
        try:
            yield
        finally:
            self._done.set()
            self._thread.join(2 * _TICK_S + 1)
            if self._wakeup is not None:
                signal.set_wakeup_fd(previous_fd if previous_fd is not None else -1)
                for sock in self._wakeup:
                    sock.close()
                self._wakeup = None

    def check(self, now: float) -> None:
        """One round of the watch (the thread calls it every tick; tests call it directly)."""
        with self._lock:
            calls = list(self._calls)
        if not calls:
            return
        overdue = next((c for c in calls if now > c.deadline), None)
        if overdue is not None:
            log.error(
                "%s has been blocked for %.0f s, past its timeout: exiting %d for a restart "
                "(the open batch is not committed and will be redone)",
                overdue.what,
                now - overdue.started,
                EXIT_TEMPORARY,
            )
            self._exit(EXIT_TEMPORARY)
            return
        if self._stop_requested_at is None:
            return
        # A call that began after the stop request (the final commit) gets its grace too.
        blocked_since = max(self._stop_requested_at, calls[-1].started)
        if self._stop_now or now - blocked_since > self.stop_grace_s:
            log.warning(
                "stop requested while blocked in %s: exiting %d without committing the open batch",
                calls[-1].what,
                EXIT_STOPPED,
            )
            self._exit(EXIT_STOPPED)

    def signalled(self, now: float, signum: int = signal.SIGTERM) -> None:
        """A stop signal arrived (seen on the wake-up fd)."""
        stopping = self._stop_requested_at is not None
        if self._signals.means_now(signum, stopping):
            self._stop_now = True
        if not stopping:
            self._stop_requested_at = now

    def _watch(self) -> None:
        reader = self._wakeup[0] if self._wakeup is not None else None
        while not self._done.is_set():
            if reader is None:
                self._done.wait(_TICK_S)
            else:
                ready, _, _ = select.select([reader], [], [], _TICK_S)
                if ready:
                    self._read_signals(reader)
            if not self._done.is_set():
                self.check(time.monotonic())

    def _read_signals(self, reader: socket.socket) -> None:
        try:
            data = reader.recv(64)
        except (BlockingIOError, OSError):
            return
        stops = self._signals.clean | self._signals.now
        for signum in data:
            if signum in stops:
                self.signalled(time.monotonic(), signum)


# The engine's watchdog: one per process, like the signal handlers it works with.
watchdog = Watchdog()


def blocking(what: str, timeout_s: float) -> contextlib.AbstractContextManager[None]:
    """`with blocking("flush", 60): producer.flush(60)`: see `Watchdog.blocking`."""
    return watchdog.blocking(what, timeout_s)
