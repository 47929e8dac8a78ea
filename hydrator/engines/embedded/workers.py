"""`--workers N`: one run as N worker processes, and the supervisor that keeps them going.

Python runs one thread's Python code at a time, so one process uses about one core. With
`--workers N` (N > 1) the `hydrator run` process is a supervisor that starts N worker processes.
Each worker is a whole embedded engine: a member of the application's consumer group with its
own tasks, Kafka clients and transactional id. The group shares the partitions among the workers
as it does among separate instances, so exactly-once and restore hold as they do between
instances. `--workers 1` runs the engine in the `hydrator run` process itself.

* Start-up: worker 0 first; the others once one has passed the start-up checks (a broker
  answered, the topics are right), so a configuration error is reported once. Then they join
  the consumer group together (each waits, up to `ASSEMBLE_S`, until all are ready): one
  that joined alone would be given every partition, only to hand most back in a rebalance.
* The state directory: the supervisor holds `<app>/.lock` (one run per directory), worker i
  `<app>/.worker-i.lock`. Task stores stay one per task: whichever worker runs task p uses
  `<app>/<changelog>-p` (a worker given a task whose store a sibling still holds after a
  rebalance waits for it, restore.py). Worker i's transactional id is the single-process one
  with `-i` appended (worker 0's is the single-process one), and a run with fewer workers than
  the last aborts what the missing ones may have left open (engine.py).
* A worker has its own process group (a terminal's Ctrl-C reaches only the supervisor, which
  passes the stop on) and dies with its supervisor (Linux: PR_SET_PDEATHSIG; elsewhere it stops
  cleanly once it sees its parent gone).
* --metrics-port: each worker serves its metrics on a loopback port it puts on the board; the
  supervisor serves --metrics-port with their sum (hydrator/metrics/merged.py).
* The workers tell each other which partitions they hold and whether they are done
  (`WorkerBoard`): `--available-now` need not wait for the group to settle when they hold every
  partition between them, and the run ends once all were done at the same time.
* A worker leaves the consumer group as any run does, by ending (engine.py): the group drops it
  when its session expires. So the workers may all end at once.
* The progress line is the run's: each worker sends its committed counts, lag and parked keys
  to the supervisor (`ProgressPipe`), which logs their sum every --progress-interval and once
  more when the run ends; the counts of a worker that was started again carry on from its last.
* A worker's `Error:` line (what ended it: a configuration error, no broker...) goes to the
  supervisor too, which prints it once every worker has ended, after its own last lines: the
  error is the last line of a failed run, as it is in one process.

Stop: the first SIGTERM/SIGINT sends every worker SIGTERM (it finishes and commits its batch, a
blocked Kafka call getting its 10 s grace); a second sends them all SIGINT (stop now, nothing
committed). The supervisor exits once every worker has, with the run's exit code
(`Supervisor.run`).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext, SpawnProcess
from types import FrameType
from typing import Any

from hydrator.config import EmbeddedSettings, RunConfig
from hydrator.dlq.command import replay_command
from hydrator.engines.embedded.progress import Report, RunProgress
from hydrator.engines.embedded.state_dir import StateDirectory
from hydrator.engines.embedded.watchdog import EXIT_STOPPED
from hydrator.kafka.reachability import backoff_s, client_logger, wait_for_broker
from hydrator.metrics.dead_letter_ratio import EXIT_TOO_MANY_DEAD_LETTERS, too_many_dead_letters
from hydrator.topology.layout import internal_topic

log = logging.getLogger(__name__)

# A worker that ran this long was healthy: its next restart's pause starts short again.
HEALTHY_RUN_S = 120.0
# Deaths in a row, each within HEALTHY_RUN_S of its start, after which the run gives up.
GIVE_UP_AFTER = 5
# Partition numbers the workers of a run can tell each other they hold.
CLAIMS_CAPACITY = 4096
# Bound on waiting at start-up for the other workers before joining the group.
ASSEMBLE_S = 30.0
_TICK_S = 0.2
_PR_SET_PDEATHSIG = 1
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_PARENT_CHECK_S = 1.0


class Verdict(enum.Enum):
    DONE = "done"  # finished (--available-now), or stopped when the run stops
    RESTART = "restart"  # start it again
    END_RUN = "end run"  # its exit code ends the run


def judge(exitcode: int, available_now: bool) -> Verdict:
    """What a worker's end means while the run is not stopping. `exitcode` as multiprocessing
    reports it: negative when a signal killed the process."""
    if exitcode < 0:
        return Verdict.RESTART
    if exitcode == 0:
        # Outside --available-now a worker ends only when asked: someone stopped it alone.
        return Verdict.DONE if available_now else Verdict.RESTART
    return Verdict.END_RUN


def exit_code(exitcode: int) -> int:
    """A process's exit as a shell reports it: 128 + the signal that killed it."""
    return 128 - exitcode if exitcode < 0 else exitcode


def run_exit_code(cause: int | None, ends: list[int]) -> int:
    """The run's exit code: the code of the worker end that ended the run, else the first end
    that was not clean (in the order they came), else 0. `ends` as `exit_code` gives them."""
    if cause is not None:
        return cause
    return next((code for code in ends if code != 0), 0)


class WorkerBoard:
    """What the workers of a run tell each other, in memory they share: the partition numbers
    each holds, and whether each has finished its part (--available-now)."""

    def __init__(
        self, context: SpawnContext, workers: int, capacity: int = CLAIMS_CAPACITY
    ) -> None:
        self._holders = context.Array("i", capacity)  # holder's index + 1; 0: nobody
        # One flag per worker, and last whether all were ever seen finished at once: from then
        # on the run is done, whatever a rebalance as the first of them leave makes of a part.
        self._finished = context.Array("b", workers + 1)
        self._lock = context.Lock()
        # Who is ready to join the group; last: all were once (a restarted worker then joins
        # at once).
        self._ready = context.Array("b", workers + 1, lock=False)
        # The loopback port each worker serves its metrics on (0: none).
        self._metrics_ports = context.Array("i", workers, lock=False)

    def claim(self, worker: int, partitions: set[int]) -> None:
        """`worker` holds exactly `partitions` now."""
        mark = worker + 1
        with self._holders.get_lock():
            holders = self._holders.get_obj()
            for p in range(len(holders)):
                if p in partitions:
                    holders[p] = mark
                elif holders[p] == mark:
                    holders[p] = 0

    def held_by_others(self, worker: int) -> set[int]:
        mark = worker + 1
        with self._holders.get_lock():
            holders = list(self._holders.get_obj())
        return {p for p, holder in enumerate(holders) if holder and holder != mark}

    def finish(self, worker: int, finished: bool) -> bool:
        """Note whether `worker` has finished its part; whether the run is done (`run_done`)."""
        with self._finished.get_lock():
            flags = self._finished.get_obj()
            flags[worker] = finished
            if all(flags[:-1]):
                flags[-1] = True
            return bool(flags[-1])

    def run_done(self) -> bool:
        """Every worker was seen finished at once."""
        with self._finished.get_lock():
            return bool(self._finished.get_obj()[-1])

    def ended(self, worker: int) -> None:
        """`worker`'s process ended: it holds nothing and serves nothing."""
        self.claim(worker, set())
        with self._lock:
            self._metrics_ports[worker] = 0

    def ready(self, worker: int) -> bool:
        """`worker` is ready to join the group; whether every worker is, or once was."""
        with self._lock:
            self._ready[worker] = True
            if all(self._ready[:-1]):
                self._ready[-1] = True
            return bool(self._ready[-1])

    def serve_metrics(self, worker: int, port: int) -> None:
        with self._lock:
            self._metrics_ports[worker] = port

    def metrics_ports(self) -> dict[int, int]:
        """Worker index -> the loopback port it serves its metrics on, for those serving."""
        with self._lock:
            return {i: port for i, port in enumerate(self._metrics_ports) if port}

    def forget(self, worker: int) -> None:
        """`worker` died and is started again: it holds nothing and has not finished (its next
        run starts over)."""
        self.ended(worker)
        self.finish(worker, False)


@dataclass(frozen=True)
class FinalError:
    """A worker's `Error:` line, for the supervisor to print as the run's last."""

    line: str


@dataclass(frozen=True)
class Worker:
    """What a worker process knows of the run it belongs to (handed to its engine)."""

    index: int
    count: int
    board: WorkerBoard
    started_event: Any  # a multiprocessing Event, set by the first worker past its checks
    progress: multiprocessing.connection.Connection  # where it sends its progress reports

    def started(self) -> None:
        self.started_event.set()

    def claim(self, partitions: set[int]) -> None:
        self.board.claim(self.index, partitions)

    def holding(self) -> set[int]:
        """The partition numbers the other workers hold."""
        return self.board.held_by_others(self.index)

    def finish_together(self, finished: bool) -> bool:
        """Note whether this worker has finished its part; whether the run is done."""
        return self.board.finish(self.index, finished)

    def run_done(self) -> bool:
        return self.board.run_done()

    def serve_metrics(self, port: int) -> None:
        """This worker serves its metrics on loopback `port` (the supervisor merges them)."""
        self.board.serve_metrics(self.index, port)

    def report(self, report: Report) -> None:
        """This worker's progress, for the run's progress line (the supervisor logs it)."""
        # The supervisor gone: the worker dies with it anyway.
        with contextlib.suppress(OSError):
            self.progress.send(report)

    def tell_error(self, line: str) -> None:
        """The line saying what ends this worker: printed by the supervisor after every line
        of its own, else (the supervisor gone) here."""
        try:
            self.progress.send(FinalError(line))
        except OSError:
            print(line, file=sys.stderr, flush=True)

    def wait_for_siblings(self, should_stop: Callable[[], bool]) -> None:
        """Until every worker of the run is ready to join the group (at start-up only)."""
        deadline = time.monotonic() + ASSEMBLE_S
        while not self.board.ready(self.index):
            if should_stop() or time.monotonic() >= deadline:
                return
            time.sleep(0.05)


# Sets up a worker process's logging, runs its engine and returns its exit code (hydrator.cli
# passes its own, so that a worker ends with the codes a single-process run would). It must be
# a module-level function: the worker process imports it by name.
RunWorker = Callable[[RunConfig, EmbeddedSettings, Worker], int]


@dataclass(frozen=True)
class _WorkerSpec:
    config: RunConfig
    embedded: EmbeddedSettings
    worker: Worker
    run: RunWorker
    supervisor_pid: int


def _worker_main(spec: _WorkerSpec) -> None:
    """A worker process's entry point. It starts with the stop signals blocked (`_start`)."""
    os.setpgrp()
    # Asked to stop before the engine listens: nothing is under way yet, so just end.
    signal.signal(signal.SIGTERM, _exit_before_start)
    signal.signal(signal.SIGINT, _exit_before_start)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    _die_with_supervisor(spec.supervisor_pid)
    sys.exit(spec.run(spec.config, spec.embedded, spec.worker))


def _exit_before_start(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0 if signum == signal.SIGTERM else EXIT_STOPPED)


def _die_with_supervisor(supervisor_pid: int) -> None:
    """A worker must not outlive its supervisor: a new run would find it holding stores."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor_pid:  # it died before the line above
            os._exit(1)
        return

    def watch() -> None:
        while os.getppid() == supervisor_pid:
            time.sleep(_PARENT_CHECK_S)
        log.warning("the supervisor is gone: stopping")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="supervisor-watch", daemon=True).start()


@dataclass
class _Slot:
    """One worker's place in the run, across its restarts."""

    index: int
    process: SpawnProcess | None = None
    started_at: float = 0.0
    start_at: float | None = None  # when to start it (again); None: not planned
    quick_deaths: int = 0
    done: bool = False
    reports: multiprocessing.connection.Connection | None = None  # its progress reports


@dataclass
class Supervisor:
    config: RunConfig
    embedded: EmbeddedSettings
    run_worker: RunWorker
    context: SpawnContext = field(default_factory=lambda: multiprocessing.get_context("spawn"))

    def __post_init__(self) -> None:
        self._workers(self.embedded.workers)
        self._started = self.context.Event()
        self._gate_open = False
        self._stop_requests = 0
        self._signals_received: list[str] = []  # in order, for the log
        self._stops_seen = 0
        self._progress = RunProgress(self.config.progress_interval_s)
        self._cause: int | None = None
        self._ends: list[int] = []
        self._errors: list[str] = []  # the workers' Error: lines, in the order they came

    def _workers(self, count: int) -> None:
        """The run's workers are `count` (before any has started)."""
        self._slots = [_Slot(i) for i in range(count)]
        self._board = WorkerBoard(self.context, count)

    def run(self) -> int:
        """Start the workers, keep them running, and return the run's exit code:
        * a worker killed by a signal, or one that exits 0 outside --available-now while the
          run is not stopping, is started again after a pause (1 s growing to 15 s); after
          GIVE_UP_AFTER such deaths in a row, each within HEALTHY_RUN_S, the run stops with
          128 + the signal (or 1);
        * any other exit code of a worker (1, 2, 75, 130...) stops the others as SIGTERM
          would, and the run exits with it;
        * stopped by SIGTERM/SIGINT: 0 when every worker stopped cleanly, else the first code
          a worker ended with that was not 0;
        * --available-now: 0 once every worker has finished, EXIT_TOO_MANY_DEAD_LETTERS when
          the run dead-lettered more than --max-dlq-ratio of what it read."""
        state_dir = StateDirectory(self.embedded.state_dir, self.config.application_id)
        state_dir.lock()
        log.info(state_dir.where(internal_topic(self.config.application_id, "state")))
        try:
            state_dir.process_id()  # made here, before the workers would race to make it
            with self._serving_metrics(), _signals_counted(self._stop_requested):
                if not self._fit_to_input():
                    return 0  # stopped while waiting for a broker
                state_dir.record_workers(max(len(self._slots), state_dir.recorded_workers()))
                self._supervise()
        finally:
            state_dir.unlock()
        code = run_exit_code(self._cause, self._ends)
        if code == 0 and self.config.available_now and not self._stops_seen:
            totals = self._progress.totals
            line = too_many_dead_letters(
                totals["records"],
                totals["dead_letters"],
                self.config.max_dlq_ratio,
                replay_command(self.config, self.embedded.state_dir),
            )
            if line is not None:
                log.error(line)
                return EXIT_TOO_MANY_DEAD_LETTERS
        return code

    def _fit_to_input(self) -> bool:
        """With the default worker count (one per CPU), no more workers than the input has
        partitions: one beyond would hold none, and idle. Asks the broker, waiting for it as the
        engine does (a configuration error or no broker in time ends the run the same way);
        False when stopped meanwhile. A missing input topic is left to worker 0 to report."""
        if not self.embedded.workers_fit_input or len(self._slots) == 1:
            return True
        partitions = input_partition_count(
            self.config, self.embedded.startup_timeout_ms, lambda: self._stop_requests > 0
        )
        if partitions is None:
            return self._stop_requests == 0
        if partitions < len(self._slots):
            self._workers(max(partitions, 1))
            log.info(
                "%d worker%s: the input has %d partition%s, and a worker beyond them would "
                "idle (--workers N sets the count)",
                len(self._slots),
                "" if len(self._slots) == 1 else "s",
                partitions,
                "" if partitions == 1 else "s",
            )
        return True

    @contextlib.contextmanager
    def _serving_metrics(self) -> Iterator[None]:
        """--metrics-port: the workers' endpoints merged into one (hydrator/metrics/merged.py)."""
        if self.config.metrics_port is None:
            yield
            return
        from prometheus_client import CollectorRegistry

        from hydrator.metrics.exporter import MetricsServer
        from hydrator.metrics.merged import MergedCollector, MergedHealth

        registry = CollectorRegistry(auto_describe=False)
        # the board and the slots as they are when asked: _fit_to_input may replace them
        registry.register(MergedCollector(lambda: self._board.metrics_ports()))
        health = MergedHealth(lambda: self._board.metrics_ports(), lambda: len(self._slots))
        server = MetricsServer(
            self.config.metrics_port, registry, health, host=self.config.metrics_host
        )
        server.start()
        try:
            yield
        finally:
            server.close()

    def _stop_requested(self, signum: int) -> None:
        self._stop_requests += 1
        self._signals_received.append(signal.Signals(signum).name)

    @property
    def _stopping(self) -> bool:
        return self._stops_seen > 0 or self._cause is not None

    def _supervise(self) -> None:
        self._slots[0].start_at = time.monotonic()
        while True:
            self._pass_stops_on()
            self._open_gate()
            self._start_due()
            live = [slot for slot in self._slots if slot.process is not None]
            if not live and (self._stopping or all(slot.done for slot in self._slots)):
                self._progress.log_last()
                for line in self._errors:
                    print(line, file=sys.stderr, flush=True)
                return
            waits: list[Any] = [slot.process.sentinel for slot in live if slot.process]
            waits += [slot.reports for slot in live if slot.reports is not None]
            multiprocessing.connection.wait(waits, timeout=_TICK_S)
            for slot in live:
                self._read_reports(slot)
                if slot.process is not None and not slot.process.is_alive():
                    self._read_reports(slot)  # what it sent before it ended
                    self._ended(slot)
            self._progress.maybe_log()

    def _read_reports(self, slot: _Slot) -> None:
        if slot.reports is None:
            return
        try:
            while slot.reports.poll():
                message = slot.reports.recv()
                if isinstance(message, FinalError):
                    self._errors.append(message.line)
                else:
                    self._progress.report(slot.index, message)
        except (EOFError, OSError):  # it ended (or died mid-message): it sends no more
            slot.reports.close()
            slot.reports = None

    def _pass_stops_on(self) -> None:
        while self._stops_seen < self._stop_requests:
            self._stops_seen += 1
            name = self._signals_received[self._stops_seen - 1]
            if self._stops_seen == 1:
                # The workers are told with SIGTERM whatever came (Ctrl-C: SIGINT): they say so.
                log.info("%s received: the workers commit and stop (sent SIGTERM)", name)
                self._signal_all(signal.SIGTERM)
            else:
                log.warning("%s received again: the workers stop now, without committing", name)
                self._signal_all(signal.SIGINT)

    def _open_gate(self) -> None:
        if self._gate_open or not self._started.is_set():
            return
        self._gate_open = True
        for slot in self._slots[1:]:
            if slot.process is None and slot.start_at is None and not slot.done:
                slot.start_at = time.monotonic()

    def _start_due(self) -> None:
        if self._stopping:
            return
        now = time.monotonic()
        for slot in self._slots:
            if slot.process is None and slot.start_at is not None and now >= slot.start_at:
                self._start(slot)

    def _start(self, slot: _Slot) -> None:
        reports, sender = self.context.Pipe(duplex=False)
        worker = Worker(slot.index, len(self._slots), self._board, self._started, sender)
        spec = _WorkerSpec(self.config, self.embedded, worker, self.run_worker, os.getpid())
        process = self.context.Process(
            target=_worker_main, args=(spec,), name=f"hydrator-worker-{slot.index}"
        )
        # The new process inherits the blocked signals: a stop that comes while it is still
        # starting waits for its handlers instead of killing it.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            sender.close()  # the worker has its own copy: the last one gone ends the pipe
        slot.process, slot.started_at, slot.start_at = process, time.monotonic(), None
        slot.reports = reports
        log.info("worker %d started (pid %s)", slot.index, process.pid)

    def _ended(self, slot: _Slot) -> None:
        assert slot.process is not None
        exitcode = slot.process.exitcode if slot.process.exitcode is not None else 1
        pid = slot.process.pid
        slot.process.close()
        slot.process = None
        code = exit_code(exitcode)
        how = _describe(exitcode)
        self._board.ended(slot.index)
        self._progress.ended(slot.index)
        if slot.reports is not None:
            slot.reports.close()
            slot.reports = None
        if self._stopping:
            self._ends.append(code)
            slot.done = True
            log.info("worker %d (pid %s) %s", slot.index, pid, how)
            return
        verdict = judge(exitcode, self.config.available_now)
        if verdict is not Verdict.DONE:
            self._board.forget(slot.index)
        if verdict is Verdict.DONE:
            self._ends.append(code)
            slot.done = True
            log.info("worker %d (pid %s) finished", slot.index, pid)
        elif verdict is Verdict.END_RUN:
            # The worker said why (a configuration error, no broker...). With nothing else to
            # stop, its line stays the run's last.
            self._end_run(code, f"worker {slot.index} (pid {pid}) {how}", quiet=True)
        else:
            self._restart_later(slot, pid, how, code)

    def _restart_later(self, slot: _Slot, pid: int | None, how: str, code: int) -> None:
        now = time.monotonic()
        if now - slot.started_at >= HEALTHY_RUN_S:
            slot.quick_deaths = 0
        slot.quick_deaths += 1
        if slot.quick_deaths > GIVE_UP_AFTER:
            self._end_run(
                code or 1,
                f"worker {slot.index} (pid {pid}) {how}, its {slot.quick_deaths}th end in a row "
                f"within {HEALTHY_RUN_S:.0f} s of its start: giving up",
            )
            return
        delay = backoff_s(slot.quick_deaths - 1)
        slot.start_at = now + delay
        log.warning(
            "worker %d (pid %s) %s: starting it again in %.0f s (restart %d in a row)",
            slot.index,
            pid,
            how,
            delay,
            slot.quick_deaths,
        )

    def _end_run(self, code: int, why: str, quiet: bool = False) -> None:
        """Stop the run (every worker commits and stops); it exits with `code`."""
        self._cause = code
        self._signal_all(signal.SIGTERM)
        if any(slot.process is not None for slot in self._slots):
            log.warning("%s: stopping the other workers; the run exits %d", why, code)
        elif not quiet:
            log.error("%s: the run exits %d", why, code)

    def _signal_all(self, signum: int) -> None:
        for slot in self._slots:
            if slot.process is not None and slot.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):  # the loop sees it next
                    os.kill(slot.process.pid, signum)


def input_partition_count(
    config: RunConfig, startup_timeout_ms: int, should_stop: Callable[[], bool]
) -> int | None:
    """The largest partition count of the run's input topics, once a broker answers (waiting
    up to --startup-timeout); None when none of them exists yet or a stop came first."""
    from confluent_kafka.admin import AdminClient

    from hydrator.kafka.admin import partition_counts

    admin_config = config.kafka.admin()
    if not wait_for_broker(admin_config, startup_timeout_ms / 1000, should_stop):
        return None
    admin = AdminClient({**admin_config, "logger": client_logger()})  # type: ignore[dict-item]
    counts = [n for n in partition_counts(admin, config.input_topics).values() if n is not None]
    return max(counts, default=None)


def _describe(exitcode: int) -> str:
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited {exitcode}"


class _signals_counted:
    """SIGINT and SIGTERM count as stop requests while the supervisor runs."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self._on_signal = on_signal
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._on_signal(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
