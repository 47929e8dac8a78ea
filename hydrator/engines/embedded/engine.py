"""Wiring: build the Kafka clients, the state directory and the loop; tear them down in order.

Faults of the broker do not end the run. At start-up the engine waits for a broker at
--bootstrap-servers (one line per attempt, up to --startup-timeout). When a batch cannot be
committed or a Kafka call fails while running (an outage), it tears everything down and starts
again in the same process: new clients, tasks reopened from their local stores, input resumed
from the committed offsets (the failed batch was aborted and its state dropped, so nothing is
lost), after a growing pause and one log line. A blocking call that overruns its timeout ends
the process with exit code 75 for the supervisor to restart it (watchdog.py).

A run leaves its consumer group by ending, not by asking: when run() returns, the consumer is
still open, and the process ends with it (`in_group`); the group drops the member once its session
times out (`session.timeout.ms`, 6 s by default) and hands its partitions on. Kafka Streams ends
the same way by default. The reason is Tansu (0.6, the broker of the tests and the demo): a
LeaveGroup from the member leading a group that is still forming (say, just after another member
left or joined) leaves the group waiting for that leader for ever, for this run and every later
one (reproduced with plain consumers); a member whose session expires is dropped cleanly. Apache
Kafka copes with both; there the cost is that a stopped member's partitions move a session timeout
later. Only an in-process restart after a failure closes the consumer (and so leaves).

The engine is also what each worker process of a run with --workers N runs (workers.py): it is
then told which worker it is, and that decides its lock, its transactional id and its share of
the state cache. And it is what `hydrator dlq replay` runs, in one process, with the dead-letter
topic as its input (dlq_replay.py).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from hydrator.config import EmbeddedSettings, RunConfig
from hydrator.core.hydrator import Hydrator
from hydrator.dlq.command import replay_command
from hydrator.dlq.selection import Selection
from hydrator.dlq.topic import dead_letter_partitions
from hydrator.engines.embedded.assignment import Assignment
from hydrator.engines.embedded.available_now import AvailableNow
from hydrator.engines.embedded.counts import RunCounts
from hydrator.engines.embedded.dlq_replay import (
    DlqInput,
    ReplayRefused,
    wait_for_members_to_leave,
)
from hydrator.engines.embedded.loop import LoopSettings, StreamLoop
from hydrator.engines.embedded.metrics import EmbeddedMetrics, Phase, partition_lag
from hydrator.engines.embedded.progress import Progress, ProgressSink, Reporter
from hydrator.engines.embedded.reselect_step import batch_reselect
from hydrator.engines.embedded.restore import Restorer, RestoreStopped, set_aside
from hydrator.engines.embedded.run_parts import RunParts
from hydrator.engines.embedded.sized_sink import SizeCheckedSink
from hydrator.engines.embedded.state_dir import StateDirectory, StateDirLocked
from hydrator.engines.embedded.topics import prepare_topology, record_limits
from hydrator.engines.embedded.transaction import TransactionalWriter, TransactionFailed
from hydrator.engines.embedded.watchdog import (
    STANDALONE,
    WORKER,
    StopSignals,
    blocking,
    watchdog,
)
from hydrator.formats import codec_for
from hydrator.kafka import broker_quirks
from hydrator.kafka.client_config import FETCH_QUEUE_BACKOFF_MS, ClientSettings, client_error
from hydrator.kafka.offsets import OffsetProbe
from hydrator.kafka.reachability import backoff_s, client_logger, wait_for_broker
from hydrator.metrics.dead_letter_ratio import check_dead_letters
from hydrator.seeding.snapshots import read_marks
from hydrator.topology.emit import TopicWriter
from hydrator.topology.layout import Topology, internal_topic
from state.errors import StorageError, StoreCorrupted

if TYPE_CHECKING:
    from hydrator.engines.embedded.workers import Worker

log = logging.getLogger(__name__)

# Tunable through -X; the engine's managed settings are in the functions below.
CONSUMER_DEFAULTS: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    # for Tansu, and what they cost on Apache Kafka: hydrator/kafka/broker_quirks.py
    "session.timeout.ms": broker_quirks.SESSION_TIMEOUT_MS,
    "heartbeat.interval.ms": broker_quirks.HEARTBEAT_INTERVAL_MS,
    "fetch.wait.max.ms": broker_quirks.FETCH_WAIT_MAX_MS,
    "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
}
PRODUCER_DEFAULTS: dict[str, Any] = {
    # What a batch produces becomes visible when its transaction commits, and a commit flushes
    # (librdkafka's flush sends at once, whatever the linger), so lingering delays nothing a
    # reader sees. At 5 ms librdkafka's I/O thread woke for every few records and spent a
    # quarter of the process's CPU in poll() and clock reads; at 100 ms batches leave full.
    "linger.ms": 100,
    # An enriched record carries the row twice (`after` and a filled `before`), and rows are
    # text: lz4 shrinks a batch of them to a fifth (the bench's rows) for a few microseconds a
    # record, and the broker and every reader handle that fifth. In the bench the broker's CPU
    # per event fell by 40%. `-X producer.compression.type=none` turns it off.
    "compression.type": "lz4",
    "queue.buffering.max.messages": 500_000,
    # How long a dead instance's open transaction blocks read_committed readers (Kafka aborts it
    # then; Tansu never does). A batch commits within a second or two.
    "transaction.timeout.ms": 30_000,
    # Java-compatible key hashing for anything produced without an explicit partition.
    "partitioner": "murmur2_random",
    # a lost transaction coordinator after an outage (hydrator/kafka/broker_quirks.py)
    "metadata.recovery.strategy": broker_quirks.METADATA_RECOVERY_STRATEGY,
}


# A producer batch's most (uncompressed), when the topics take it.
BATCH_BYTES = 4_000_000
# Bound on tearing the clients down (they may be talking to a broker that is gone).
CLOSE_TIMEOUT_S = 30.0
# A run that lasted this long was healthy: the next restart's pause starts short again.
HEALTHY_RUN_S = 120.0
# How often a worker reports its progress to the supervisor.
REPORT_INTERVAL_S = 1.0
# Bound on aborting the transaction a worker of an earlier run left open.
FENCE_TIMEOUT_S = 60.0


class EmbeddedEngine:
    def __init__(
        self,
        config: RunConfig,
        embedded: EmbeddedSettings,
        hydrator: Hydrator | None = None,
        worker: Worker | None = None,
        replay: Selection | None = None,
    ) -> None:
        """`worker`: this process is that worker of a run with several (None: the run's only
        process). `replay`: replay these dead letters of the application instead of reading
        its inputs (`hydrator dlq replay`: one process, until the dead-letter topic is drained
        up to its end at start)."""
        if replay is not None:
            config = replace(config, available_now=True)
            embedded = replace(embedded, workers=1)
        self.config = config
        self.embedded = embedded
        self.replay = replay
        self.hydrator = hydrator or Hydrator(
            codec_for(config.format, config.format_options), config.hydration
        )
        self.run_counts = RunCounts()
        # The run's committed counts (the progress line's).
        self.counts: Counter[str] = self.run_counts.totals
        self.metrics = EmbeddedMetrics(
            config.application_id,
            config.input_topics,
            embedded.commit_interval_ms,
            self.run_counts,
            watchdog.in_call_with_time,
            backlog_commit_interval_ms=embedded.backlog_commit_interval_ms,
        )
        self.worker = worker
        self._stop = threading.Event()
        # The consumer of the last run, left open once it ended (see the module's note).
        self._member: Consumer | None = None

    def request_stop(self) -> None:
        """Finish and commit the current batch, then return from run()."""
        self._stop.set()

    @property
    def in_group(self) -> bool:
        """After run(): the consumer is still a member of the group. The process should end
        now, with `os._exit` so that nothing closes it (interpreter exit would); or call
        `leave_group`."""
        return self._member is not None

    def leave_group(self) -> None:
        """Close the consumer left open by run(): it leaves the group (a LeaveGroup request)."""
        self._leave_group()

    def _leave_group(self) -> None:
        member, self._member = self._member, None
        if member is not None:
            with blocking("closing the consumer", CLOSE_TIMEOUT_S):
                member.close()

    def run(self) -> None:
        config = self.config
        clients = config.kafka
        # The state directory first: a bad --state-dir must not leave topics behind.
        state_dir = StateDirectory(self.embedded.state_dir, config.application_id)
        if self.worker is None:
            self._lock(state_dir)
            log.info(state_dir.where(internal_topic(config.application_id, "state")))
        else:
            state_dir.lock_worker(self.worker.index)
        signals = STANDALONE if self.worker is None else WORKER
        try:
            with watchdog.running(signals), _stop_on_signals(self._stop, signals):
                if not self._wait_for_broker(clients):
                    return
                if self.replay is not None and not self._prepare_replay(clients):
                    return
                topology = self._topology(clients)
                self._take_table_marks(clients)
                if self._index == 0:
                    self._fence_missing_workers(clients, state_dir)
                if self.worker is not None:
                    self.worker.started()
                    self.worker.wait_for_siblings(self._should_stop)
                self._run_recovering(clients, topology, state_dir)
        finally:
            state_dir.unlock()
        if config.available_now and self.worker is None and not self._stop.is_set():
            # (with --workers the supervisor checks the run's totals)
            check_dead_letters(
                self.counts["records"],
                self.counts["dead_letters"],
                config.max_dlq_ratio,
                replay_command(config, self.embedded.state_dir),
            )

    def _take_table_marks(self, clients: ClientSettings) -> None:
        """The snapshots the inputs' tables were bootstrapped in (hydrator/seeding/
        snapshots.py), for the core's rule on keys the snapshot had no row for."""
        marks = read_marks(clients, self.config.application_id, self.config.input_topics)
        settings = self.hydrator.settings
        if marks != settings.table_snapshots:
            settings = replace(settings, table_snapshots=marks)
            self.hydrator = Hydrator(self.hydrator.codec, settings)

    def _lock(self, state_dir: StateDirectory) -> None:
        try:
            state_dir.lock()
        except StateDirLocked as exc:
            if self.replay is None:
                raise
            raise ReplayRefused(
                f"{state_dir.path} is in use: a run of the application is running here; stop "
                "it, then replay"
            ) from exc

    def _prepare_replay(self, clients: ClientSettings) -> bool:
        """Before a replay lays out its topics: the dead-letter topic must exist (a replay
        creates no topics for an id that never ran), and no run of the application may be in
        its consumer group (a run that ended a moment ago leaves when its session times out:
        waited for). False when a stop was requested while waiting."""
        admin = _client(AdminClient, clients.admin())
        dead_letter_partitions(admin, self.config.application_id)
        session_ms = float(clients.consumer(self._consumer_settings())["session.timeout.ms"])
        return wait_for_members_to_leave(
            admin,
            self.config.application_id,
            2 * session_ms / 1000 + 5,
            self._should_stop,
        )

    def _should_stop(self) -> bool:
        """Whether a stop was requested; every loop the engine waits in asks, so an answer
        also tells /healthz that the engine's thread is turning."""
        self.metrics.turned()
        return self._stop.is_set()

    @property
    def _index(self) -> int:
        return self.worker.index if self.worker is not None else 0

    @property
    def _workers(self) -> int:
        return self.worker.count if self.worker is not None else 1

    def _fence_missing_workers(self, clients: ClientSettings, state_dir: StateDirectory) -> None:
        """An earlier run with more workers than this one may have left a transaction open
        under the id of a worker this run does not have (a run killed mid-batch). No worker
        would initialise that id again, and its open transaction would hold back read_committed
        readers of the outputs and the changelog (on Tansu, for ever): initialising it here
        aborts it."""
        recorded = state_dir.recorded_workers()
        for index in range(self._workers, recorded):
            transactional_id = self._transactional_id(state_dir, index)
            settings = {**PRODUCER_DEFAULTS, "transactional.id": transactional_id}
            producer = _client(Producer, clients.producer(settings))
            try:
                with blocking(f"aborting {transactional_id}'s transaction", FENCE_TIMEOUT_S):
                    producer.init_transactions(FENCE_TIMEOUT_S)
            except KafkaException as exc:
                log.warning(
                    "could not abort what worker %d of an earlier run may have left open (%s); "
                    "trying again at the next start",
                    index,
                    _first_line(exc),
                )
                return
            log.info("aborted what worker %d of an earlier run may have left open", index)
        if recorded != self._workers:
            state_dir.record_workers(self._workers)

    def _transactional_id(self, state_dir: StateDirectory, index: int) -> str:
        """Stable across restarts, so a restarted worker fences its own dead transaction at
        once; worker 0's is a single-process run's, so changing --workers keeps it."""
        base = f"{self.config.application_id}-{state_dir.process_id()}"
        return base if index == 0 else f"{base}-{index}"

    def _wait_for_broker(self, clients: ClientSettings, at_start: bool = True) -> bool:
        """False when a stop was requested while waiting. `at_start`: a host name that does not
        resolve ends the run at once (after an outage it is waited for)."""
        self.metrics.enter(Phase.WAITING_FOR_BROKER)
        return wait_for_broker(
            clients.admin(),
            self.embedded.startup_timeout_ms / 1000,
            self._should_stop,
            at_start=at_start,
        )

    def _run_recovering(
        self, clients: ClientSettings, topology: Topology, state_dir: StateDirectory
    ) -> None:
        """`_run`, started again after each failure the broker or a local store caused."""
        restarts = 0
        while True:
            began = time.monotonic()
            try:
                self._run(clients, topology, state_dir)
                return
            except RestoreStopped:
                log.info("stopped during restore")
                return
            except Exception as exc:
                storage = isinstance(exc, StorageError)
                if not (storage or _broker_trouble(exc)):
                    raise
                if storage:  # whether or not the run goes on, the next open rebuilds it
                    self._set_store_aside(exc, topology)  # type: ignore[arg-type]
                if self._stop.is_set():
                    log.warning("stopped; the last batch was not committed: %s", _first_line(exc))
                    return
                self._leave_group()
                if time.monotonic() - began > HEALTHY_RUN_S:
                    restarts = 0
                delay = backoff_s(restarts)
                restarts += 1
                self.counts["restarts"] += 1
                self.metrics.enter(Phase.RESTARTING)
                log.warning(
                    "%s failed (%s): restarting the engine in %.0f s (restart %d); the "
                    "uncommitted batch is redone from the committed offsets",
                    "the local state store" if storage else "Kafka",
                    _first_line(exc),
                    delay,
                    restarts,
                )
            if not _sleep_unless(delay, self._should_stop):
                return
            if not self._wait_for_broker(clients, at_start=False):
                return

    def _set_store_aside(self, failure: StorageError, topology: Topology) -> None:
        """A store found damaged while running (its stores are closed now, the batch aborted) is
        moved aside, and rebuilt from the changelog when the restarted run opens its task. Other
        storage failures (a full disk, say) leave the store as it is: its files are sound."""
        path = failure.path
        if not isinstance(failure, StoreCorrupted) or path is None:
            return
        prefix = f"{topology.changelog_topic}-"
        where = path.name if path.name.startswith(prefix) else str(path)
        set_aside(path, where, failure, self.counts)

    def _run(self, clients: ClientSettings, topology: Topology, state_dir: StateDirectory) -> None:
        config = self.config
        run = self._open(clients, topology, state_dir)
        reselect = batch_reselect(self.hydrator, config)
        try:
            run.writer.init()
            replay = None
            if self.replay is not None:
                replay = DlqInput(run.consumer, run.writer, topology, self.replay, self.run_counts)
                replay.start(run.probe)
            parts = RunParts(
                run.consumer, run.writer, run.assignment, topology, self.run_counts, self.metrics
            )
            settings = LoopSettings(
                self.embedded.commit_interval_ms,
                self.embedded.backlog_commit_interval_ms,
                new_partitions_from_first_record=_resets_to_earliest(run.consumer_config),
                new_inputs_at_end=run.probe.ends
                if _resets_to_latest(run.consumer_config)
                else None,
            )
            available_now = self._available_now(run, topology, replay)
            progress = self._progress(parts, replay)
            loop = StreamLoop(parts, settings, progress, available_now, reselect, replay)
            self.metrics.enter(Phase.RUNNING, run.assignment)
            loop.run(self._should_stop)
            self.metrics.enter(Phase.STOPPING)
        finally:
            # The loop has committed (or, failing, aborted) its last batch. The consumer stays
            # open: the group member ends with the process (see the module's note); an
            # in-process restart closes it (`_leave_group`).
            self._member = run.consumer
            if reselect is not None:
                reselect.client.close()
            run.close()

    def _open(
        self, clients: ClientSettings, topology: Topology, state_dir: StateDirectory
    ) -> _RunClients:
        """The clients and the tasks' owner of one start of the engine."""
        config = self.config
        restore = {
            **topology.limits.consumer,
            "group.id": f"{config.application_id}-restore",
            "logger": client_logger(),
        }
        producer_settings = self._producer_settings(state_dir, topology)
        limits = record_limits(
            _client(AdminClient, clients.admin()),
            topology,
            int(clients.producer(producer_settings)["message.max.bytes"]),
        )
        # Batches fit the topics as the broker has them (a topic made beforehand at a broker's
        # 1 MB default takes less than the engine's own would).
        producer_settings["batch.size"] = min(producer_settings["batch.size"], limits.smallest())
        producer_config = clients.producer(producer_settings)
        producer = _client(Producer, producer_config)
        consumer_settings = {**topology.limits.consumer, **self._consumer_settings()}
        consumer_config = clients.consumer(consumer_settings)
        if self.replay is not None:
            # the dead letters no replay has read yet are read from the first
            consumer_config["auto.offset.reset"] = "earliest"
        consumer = _client(Consumer, consumer_config)
        probe = OffsetProbe(clients.consumer(restore))
        restorer = Restorer(
            clients.consumer(restore),
            probe,
            topology.changelog_topic,
            self._should_stop,
            self.counts,
        )
        writer = TransactionalWriter(producer, topology)
        sink = SizeCheckedSink(
            TopicWriter(topology, writer.write), limits, topology, self.run_counts
        )
        assignment = Assignment(
            topology,
            state_dir,
            restorer,
            self.hydrator,
            sink,
            self.run_counts,
            probe,
            # The budget is the run's: each worker takes its share.
            self.embedded.state_cache_bytes // self._workers,
            config.large_value_threshold,
            config.large_value_compression,
            self.worker.claim if self.worker is not None else lambda owned: None,
        )
        return _RunClients(producer, consumer, consumer_config, probe, restorer, writer, assignment)

    def _progress(self, parts: RunParts, replay: DlqInput | None) -> ProgressSink:
        def lag() -> dict[str, int]:
            if replay is not None:
                return replay.remaining()
            return _topic_lag(parts.consumer, parts.assignment, parts.topology)

        def parked() -> int:
            return parts.assignment.parked

        if self.worker is None:
            return Progress(self.counts, lag, parked, self.config.progress_interval_s)
        # The supervisor logs the run's line (progress.py).
        return Reporter(self.counts, lag, parked, self.worker.report, REPORT_INTERVAL_S)

    def _available_now(
        self, run: _RunClients, topology: Topology, replay: DlqInput | None
    ) -> AvailableNow | None:
        if not self.config.available_now:
            return None
        # A stopped member keeps its partitions until its session expires; then the group
        # needs a rebalance to hand them over.
        settle_s = 2 * float(run.consumer_config["session.timeout.ms"]) / 1000
        return AvailableNow(
            run.consumer,
            run.probe,
            topology,
            settle_s,
            self.worker,
            replay.input_ends if replay is not None else None,
        )

    def _topology(self, clients: ClientSettings) -> Topology:
        config = self.config
        admin = _client(AdminClient, clients.admin())
        topology = prepare_topology(
            admin,
            config.application_id,
            config.input_topics,
            config.output_topic,
            config.output_suffix,
            config.hydration.max_record_bytes,
        )
        return replace(topology, replaying=True) if self.replay is not None else topology

    def _consumer_settings(self) -> dict[str, Any]:
        return {
            **CONSUMER_DEFAULTS,
            "group.id": self.config.application_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            # Range gives every member the same partition numbers of each topic: co-partitioning.
            "partition.assignment.strategy": "range",
        }

    def _producer_settings(self, state_dir: StateDirectory, topology: Topology) -> dict[str, Any]:
        limits = topology.limits
        return {
            **PRODUCER_DEFAULTS,
            # Large enough for every record the engine's topics take (-X may lower it; the size
            # checks then use the lower value), and batches that fit the smallest of them.
            # With batches of 1 MB (librdkafka's default) its I/O thread spent about as much
            # CPU polling between the many produce requests as compressing them: at
            # --commit-interval 5s, 4 MB batches cut the engine's CPU per event by a quarter.
            "message.max.bytes": limits.producer,
            "batch.size": min(BATCH_BYTES, limits.output, limits.handoff, limits.dlq),
            "transactional.id": self._transactional_id(state_dir, self._index),
            "enable.idempotence": True,
        }


@dataclass(frozen=True)
class _RunClients:
    """What one start of the engine opens, and closes in order when it ends."""

    producer: Producer
    consumer: Consumer
    consumer_config: dict[str, Any]
    probe: OffsetProbe
    restorer: Restorer
    writer: TransactionalWriter
    assignment: Assignment

    def close(self) -> None:
        """Everything but the consumer (see the module's note)."""
        self.assignment.close_all()
        with blocking("closing the producer", CLOSE_TIMEOUT_S):
            self.producer.flush(CLOSE_TIMEOUT_S)
        with blocking("closing the restore consumers", CLOSE_TIMEOUT_S):
            self.restorer.close()
            self.probe.close()


def _topic_lag(consumer: Consumer, assignment: Assignment, topology: Topology) -> dict[str, int]:
    lag: Counter[str] = Counter()
    for (topic, _), records in partition_lag(consumer, assignment, topology).items():
        lag[topic] += records
    return dict(lag)


def _resets_to_earliest(consumer_config: Mapping[str, Any]) -> bool:
    """Whether a partition without a committed offset is read from its start."""
    policy = str(consumer_config.get("auto.offset.reset", "largest")).lower()
    return policy in ("earliest", "smallest", "beginning")


def _resets_to_latest(consumer_config: Mapping[str, Any]) -> bool:
    """Whether a partition without a committed offset is read from its end (-X
    consumer.auto.offset.reset=latest: a new application id skips the topic's history)."""
    policy = str(consumer_config.get("auto.offset.reset", "largest")).lower()
    return policy in ("latest", "largest", "end")


def _client(kind: Any, config: dict[str, Any]) -> Any:
    """A Kafka client; a property librdkafka rejects is a configuration error (exit 2)."""
    try:
        return kind({"logger": client_logger(), **config})
    except (KafkaException, ValueError) as exc:
        reason = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
        # Never echo a value: it may be a secret.
        values = {k: v for k, v in config.items() if isinstance(v, str)}
        values.pop("bootstrap.servers", None)
        raise client_error(reason, values) from None


def _broker_trouble(exc: BaseException) -> bool:
    """A failure a fresh start can get past: the broker was unreachable or failed a request.
    Refusals (authorization, a topic that does not exist) would only repeat."""
    if isinstance(exc, TransactionFailed | TimeoutError):
        return True
    if isinstance(exc, KafkaException):
        error = exc.args[0] if exc.args else None
        return not (isinstance(error, KafkaError) and error.code() in _PERMANENT)
    return False


_PERMANENT = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
        KafkaError._INVALID_ARG,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _sleep_unless(seconds: float, stopped: Any) -> bool:
    """Sleep; False (early) when a stop is requested."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if stopped():
            return False
        time.sleep(min(0.2, max(end - time.monotonic(), 0.0)))
    return not stopped()


class _stop_on_signals:
    """A clean-stop signal asks to finish the batch, commit and close the stores; a "stop now"
    (a repeated signal, for a process on its own) stops at once (watchdog.StopSignals)."""

    def __init__(self, stop: threading.Event, signals: StopSignals = STANDALONE) -> None:
        self._stop = stop
        self._signals = signals
        self.worker_of_a_run = signals is WORKER
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in sorted(self._signals.clean | self._signals.now):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._signals.means_now(signum, self._stop.is_set()):
            # The clean stop is stuck (say, a restore waiting on a broker), or not wanted. The
            # open batch is aborted on the way out.
            log.warning("%s received: stopping now without committing", name)
            raise KeyboardInterrupt
        if self._stop.is_set():
            return  # the same request again (a worker may hear it from systemd and its supervisor)
        if self.worker_of_a_run:
            # The supervisor passes every stop on as SIGTERM, and says what it received.
            log.info("%s received (the run is stopping): stopping after the current batch", name)
        else:
            log.info("%s received: stopping after the current batch", name)
        self._stop.set()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
