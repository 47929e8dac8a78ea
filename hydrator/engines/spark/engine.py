"""`hydrator run --engine spark`: lay out the topics, start the query, report progress, and for
`--available-now` run it until inputs and handoffs are drained and nothing is parked."""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from hydrator.config import RunConfig, SparkSettings
from hydrator.engines.spark.checkpoint_dir import CheckpointDirectory, checkpoint_location
from hydrator.engines.spark.clock import (
    CatchUpGate,
    CatchUpListener,
    DowntimeLedger,
    ShippedGate,
    closed_gate,
)
from hydrator.engines.spark.connector import (
    described,
    sink_options,
    source_options,
    split_properties,
)
from hydrator.engines.spark.failures import driver_error, replayed_batch_report_failed, summary
from hydrator.engines.spark.kafka_io import (
    CONNECTOR,
    DESCRIPTIONS,
    check_checkpoint,
    chosen_io,
)
from hydrator.engines.spark.kafka_source import deleted_topic
from hydrator.engines.spark.metrics import SparkMetrics
from hydrator.engines.spark.parked import earliest_timeout, parked_summary, stored_totals
from hydrator.engines.spark.query import COUNTERS, OBSERVATION, QuerySpec, writer
from hydrator.engines.spark.reselect import RECORD_OVERHEAD, ReselectSpec, partition_settings
from hydrator.engines.spark.session import (
    QUIET_LOGGERS,
    STOPPING_LOGGERS,
    quiet_logs,
    spark_session,
)
from hydrator.engines.spark.stateful import HydratorSpec
from hydrator.engines.spark.timeouts import TimeoutTicker, write_tick
from hydrator.engines.spark.topic_watch import TopicWatch
from hydrator.errors import HydratorError, TemporaryFailure
from hydrator.kafka.admin import ensure_topics, max_message_bytes, missing_topics
from hydrator.kafka.client_config import ClientSettings, client_error
from hydrator.kafka.offsets import OffsetProbe
from hydrator.kafka.record_limits import TopicLimits
from hydrator.metrics.count_line import HEADLINE, describe_counts, headline_counts
from hydrator.metrics.dead_letter_ratio import check_dead_letters
from hydrator.metrics.jumps import JumpWatch
from hydrator.seeding.bootstrap_topic import bootstrap_topic_spec
from hydrator.seeding.snapshots import read_marks
from hydrator.topology.broker import (
    check_existing,
    create_absent,
    shared_partition_count,
    size_limits,
)
from hydrator.topology.layout import Topology, output_topics

log = logging.getLogger("hydrator.spark")
# py4j logs every listener callback at INFO: a line per micro-batch and listener.
logging.getLogger("py4j").setLevel(logging.WARNING)


class SparkEngine:
    def __init__(
        self,
        config: RunConfig,
        spark: SparkSettings,
    ) -> None:
        self.config = config
        self.settings = spark
        self.kafka_io = spark.kafka_io  # settled once the session is up (kafka_io.chosen_io)
        # -X properties: the librdkafka clients', and `connector.*` options for Spark's connector
        self.client_properties, self.connector_options = split_properties(config.kafka.properties)
        self.checkpoint = checkpoint_location(spark.state_dir, config.application_id)
        self.metrics = SparkMetrics(config.application_id, config.input_topics)
        self._stop = threading.Event()
        self._query: StreamingQuery | None = None
        self._spark: SparkSession | None = None
        # --available-now: records read and dead-lettered, over the runs of the query
        self._read: Counter[str] = Counter()
        # At --log-level debug Spark says all it has to say.
        self._quiet = config.log_level.upper() != "DEBUG"

    # -- set-up --------------------------------------------------------------------------------

    def _clients(self) -> ClientSettings:
        return ClientSettings(self.config.kafka.bootstrap_servers, self.client_properties)

    def _check_client_properties(self) -> None:
        """Make one client of each kind the query will make, so that a `-X` property librdkafka
        rejects is a configuration error here, naming -X, rather than a failed Spark task."""
        clients = self._clients()
        probe_group = {"group.id": f"{self.config.application_id}-probe"}
        for kind, config in (
            (Consumer, clients.consumer(probe_group)),
            (Producer, clients.producer()),
        ):
            client = _checked_client(kind, config, self.client_properties)
            if isinstance(client, Consumer):
                client.close()

    def _check_output_names(self) -> None:
        config = self.config
        output_topics(
            config.input_topics, config.output_topic, config.output_suffix, config.application_id
        )

    def _admin(self) -> AdminClient:
        return _checked_client(AdminClient, self._clients().admin(), self.client_properties)

    def _layout(self) -> Topology:
        """The topics the query reads and writes, as the embedded engine lays them out (the
        state is in the checkpoint: no changelog): the inputs exist and share one partition
        count, and the topics that exist already fit it."""
        config = self.config
        admin = self._admin()
        partitions = shared_partition_count(admin, config.input_topics)
        outputs = output_topics(config.input_topics, config.output_topic, config.output_suffix)
        limits = TopicLimits.for_max_record_bytes(config.hydration.max_record_bytes)
        topology = Topology(config.application_id, outputs, partitions, limits)
        check_existing(admin, topology, changelog=False)
        return topology

    def _create_topics(self, topology: Topology) -> dict[str, int]:
        """Create the topics the query writes that do not exist; the size limit of each."""
        config = self.config
        admin = self._admin()
        partitions = topology.partitions
        created = create_absent(admin, topology, changelog=False)
        # read as state-only input: what `hydrator state bootstrap` seeded (hydrator/bootstrap)
        created += ensure_topics(admin, [bootstrap_topic_spec(config.application_id, partitions)])
        for name in created:
            log.info("created topic %s with %d partitions", name, partitions)
        sizes = size_limits(admin, topology, changelog=False)
        if config.reselect is not None:  # it writes there too (reselect.py)
            spec = bootstrap_topic_spec(config.application_id, partitions)
            told = max_message_bytes(admin, [spec.name]).get(spec.name)
            sizes[spec.name] = told or int(spec.config["max.message.bytes"])
        return sizes

    def _spec(self, topology: Topology, sizes: Mapping[str, int]) -> QuerySpec:
        config = self.config
        # the snapshots the inputs' tables were bootstrapped in (hydrator/seeding/snapshots.py)
        marks = read_marks(self._clients(), config.application_id, config.input_topics)
        hydrator = HydratorSpec(
            replace(config.hydration, table_snapshots=marks),
            config.format,
            config.format_options,
            config.large_value_threshold,
            config.large_value_compression,
        )
        producer_max_bytes = TopicLimits.for_max_record_bytes(
            config.hydration.max_record_bytes
        ).producer
        reselect = None
        if config.reselect is not None:
            limit = min(sizes.get(topology.bootstrap_topic, producer_max_bytes), producer_max_bytes)
            reselect = ReselectSpec(
                partition_settings(config.reselect, topology.partitions),
                hydrator,
                topology,
                max_state_bytes=limit - RECORD_OVERHEAD,
            )
        return QuerySpec(
            bootstrap_servers=config.kafka.bootstrap_servers,
            inputs=tuple(config.input_topics),
            topology=topology,
            checkpoint=self.checkpoint,
            hydrator=hydrator,
            # the connector's raw options only on the connector (split_properties)
            kafka_properties=dict(
                config.kafka.properties if self.kafka_io == CONNECTOR else self.client_properties
            ),
            max_offsets_per_trigger=self.settings.max_offsets_per_trigger,
            max_message_bytes=dict(sizes),
            producer_max_bytes=producer_max_bytes,
            reselect=reselect,
            kafka_io=self.kafka_io,
        )

    def _log_connector_options(self, topology: Topology) -> None:
        """The options the query gives Spark's Kafka source and sink, secrets masked: what
        reaches the connector's Java clients (connector.py)."""
        config = self.config
        topics = [*config.input_topics, topology.handoff_topic, topology.bootstrap_topic]
        producer = TopicLimits.for_max_record_bytes(config.hydration.max_record_bytes).producer
        properties = config.kafka.properties
        source = source_options(
            config.kafka.bootstrap_servers,
            topics,
            properties,
            self.settings.max_offsets_per_trigger,
        )
        sink = sink_options(config.kafka.bootstrap_servers, self.checkpoint, properties, producer)
        log.info("Kafka source options: %s", described(source))
        log.info("Kafka sink options: %s", described(sink))

    def _ends(self, topology: Topology) -> dict[tuple[str, int], int]:
        """The ends of every input and handoff partition now: what the query must have read
        before timeouts fire."""
        config = self.config
        probe_group = {"group.id": f"{config.application_id}-probe"}
        probe = OffsetProbe(self._clients().consumer(probe_group))
        try:
            names = [*config.input_topics, topology.handoff_topic, topology.bootstrap_topic]
            return probe.ends([(name, p) for name in names for p in probe.partitions(name)])
        finally:
            probe.close()

    # -- running -------------------------------------------------------------------------------

    def run(self) -> None:
        # From the first moment: a signal while the session starts up, or just as the query
        # starts, must stop the run cleanly rather than kill the process.
        self._stop_on_signals()
        self._check_output_names()
        self._check_client_properties()
        topology = self._layout()
        # As many shuffle partitions as input partitions, the parallelism the source has: each
        # is a state store committed and a Python task run per micro-batch, a fixed cost.
        spark = spark_session(
            self.config.application_id,
            self.settings.master,
            topology.partitions,
            self.settings.conf,
        )
        # The SparkContext replaced the SIGINT handler with its own (cancel every job, raise
        # KeyboardInterrupt in whatever Py4J call the main thread is in): Ctrl-C stops as
        # SIGTERM does instead.
        self._stop_on_signals()
        self._spark = spark
        if self._quiet:
            quiet_logs(spark, QUIET_LOGGERS)
        self.kafka_io = chosen_io(spark, self.settings.kafka_io)
        log.info(
            "Spark master %s; checkpoint %s; Kafka I/O: %s (--spark-kafka-io %s)",
            spark.sparkContext.master,
            self.checkpoint,
            DESCRIPTIONS[self.kafka_io],
            self.settings.kafka_io,
            extra={"kafka_io": self.kafka_io},
        )
        if self.kafka_io == CONNECTOR:
            self._log_connector_options(topology)
        if self.connector_options and self.kafka_io != CONNECTOR:
            log.warning(
                "-X %s: options of Spark's Kafka connector, ignored on the %s Kafka I/O",
                ", ".join(f"connector.{name}" for name in sorted(self.connector_options)),
                self.kafka_io,
            )
        # Through Spark's own filesystem (a URI needs its connector), before any topic is
        # created: a bad --state-dir must not leave topics behind.
        checkpoint = CheckpointDirectory(spark, self.checkpoint)
        checkpoint.check_writable()
        # A checkpoint the other Kafka I/O wrote is refused before anything is created.
        check_checkpoint(checkpoint, self.kafka_io)
        sizes = self._create_topics(topology)
        progress = _Progress(self.config.progress_interval_s, self.kafka_io)
        spark.streams.addListener(progress)
        heartbeat = _Heartbeat(progress)
        self.metrics.attach(spark, *self._stored_at_start(spark))
        # Downtime is counted from here: the session's start-up is not processing either.
        ledger = DowntimeLedger(checkpoint)
        shipped = ShippedGate(spark)
        catch_up = CatchUpListener(CatchUpGate(self._ends(topology), shipped.open))
        spark.streams.addListener(catch_up)
        spec = replace(
            self._spec(topology, sizes), clock_offset_ms=ledger.start(), catch_up_gate=shipped.key
        )
        # A processing-time timeout makes Spark run an empty batch after every batch to fire it:
        # a batch per trigger while idle, and an AvailableNow query that never ends. Timeouts
        # fire in batches with data instead: a tick record makes one run (timeouts.py).
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        try:
            if self.config.available_now:
                self._available_now(spark, spec)
            else:
                self._continuous(spark, spec)
        finally:
            heartbeat.stop()
            ledger.stop()
            shipped.close()
            self.metrics.detach()
            spark.streams.removeListener(catch_up)
            spark.streams.removeListener(progress)
            progress.log_totals()
        if self.config.available_now and not self._stop.is_set():
            check_dead_letters(
                self._read["records"], self._read["dead_letters"], self.config.max_dlq_ratio
            )

    def _stored_at_start(self, spark: SparkSession) -> tuple[int, int]:
        """Parked keys and state bytes in the checkpoint, when metrics are served (their gauges
        start there; batches report only changes). Reading the state store is a Spark job:
        skipped otherwise."""
        if self.config.metrics_port is None:
            return 0, 0
        return stored_totals(spark, str(self.checkpoint))

    def _continuous(self, spark: SparkSession, spec: QuerySpec) -> None:
        if self._stop.is_set():
            return
        ticker = TimeoutTicker(
            lambda: earliest_timeout(spark, str(self.checkpoint)),
            lambda: write_tick(self._clients(), spec.topology.handoff_topic),
            self._stop,
        )
        spark.streams.addListener(ticker)
        ticker.start()
        try:
            trigger = f"{self.settings.trigger_interval_ms} milliseconds"
            self._run_query(
                lambda: writer(spark, spec).trigger(processingTime=trigger).start(), spec.topology
            )
        finally:
            ticker.stop()
            spark.streams.removeListener(ticker)

    def _available_now(self, spark: SparkSession, spec: QuerySpec) -> None:
        """Drain inputs; handoffs written meanwhile need another run, and parked keys wait for
        their handoff or its timeout (a tick record makes Spark run the batch that fires it)."""
        in_flight = False
        while not self._stop.is_set():
            # Each link of a chain of key changes (A -> B -> C) takes a run: its handoff is
            # read by the next. While the last run sent handoffs, none times out: a parked key
            # whose handoff is on its way would otherwise be released unresolved when the
            # chain's runs outlast --handoff-timeout (under load). Its timeout waits (closed
            # gate, clock.py) for the first run after the handoffs stop.
            run_spec = replace(spec, catch_up_gate=closed_gate()) if in_flight else spec
            query = self._run_query(
                functools.partial(_available_now_query, spark, run_spec), spec.topology
            )
            run = observed(query)
            self._read.update(
                records=sum(p.numInputRows for p in query.recentProgress),
                dead_letters=run["dead_letters"],
            )
            counts = {k: v for k, v in run.items() if v}
            log.info("available-now run: %s", counts, extra={"counts": counts})
            in_flight = bool(run["handoffs_sent"])
            if in_flight:
                continue  # they are in the handoff topic now: another run applies them
            parked, deadline_ms = parked_summary(
                spark, self.checkpoint, self.config.hydration.handoff_timeout_ms
            )
            if parked == 0:
                return
            # the deadline is in processing time (clock.py): on the wall clock it is later
            deadline_wall_ms = (deadline_ms or 0) + spec.clock_offset_ms
            wait_s = max(0.0, deadline_wall_ms / 1000 - time.time()) + 0.1
            log.info("%d keys wait for a key-change handoff; next timeout in %.1fs", parked, wait_s)
            if self._stop.wait(wait_s):
                return
            write_tick(self._clients(), spec.topology.handoff_topic)

    def _run_query(self, start: Callable[[], StreamingQuery], topology: Topology) -> StreamingQuery:
        """Start the query and wait for its end. Once per start, a query Spark's Kafka connector
        failed after replaying a batch (failures.replayed_batch_report_failed: the batch is
        committed by then) is started again."""
        admin = self._admin()
        watch = TopicWatch(
            self._read_topics(topology),
            functools.partial(missing_topics, admin),
            self._stop_current,
        )
        query = start()
        self._running(query)
        watch.start()
        try:
            self._await(query, topology)
        except _ReplayedBatchReportFailed:
            if self._stop.is_set():
                return query
            log.warning(
                "Spark's Kafka connector failed to report the batch it replayed from the "
                "checkpoint (a fault of this connector build, after the batch was committed): "
                "starting the query again"
            )
            query = start()
            self._running(query)
            self._await(query, topology, retried=True)
        finally:
            watch.stop()
        if watch.gone:
            raise HydratorError(deleted_topic(watch.gone[0]))
        return query

    def _await(self, query: StreamingQuery, topology: Topology, retried: bool = False) -> None:
        """Until `query` ends. One that failed while a topic it reads was deleted ends the run
        naming the topic, however the failure showed: the source's own error, or its process or
        a reader's dying (librdkafka can crash when a fetch answer names a deleted topic). One
        a worker's deliberate stop (`--on-unresolved fail`) or temporary failure (a schema
        registry that does not answer) ended ends the run as in the embedded engine, in one line,
        exit 1 or 75 (failures.py)."""
        try:
            query.awaitTermination()
        except Exception as exc:
            gone = self._deleted(topology)
            if gone:
                raise HydratorError(deleted_topic(gone[0])) from None
            if not retried and replayed_batch_report_failed(_error_text(exc)):
                raise _ReplayedBatchReportFailed() from exc
            error = driver_error(str(exc))
            if error is None:
                raise
            raise error from None

    def _deleted(self, topology: Topology) -> list[str]:
        """The topics the query reads that no longer exist (none when that cannot be told)."""
        try:
            return missing_topics(self._admin(), self._read_topics(topology))
        except KafkaException:
            return []

    def _read_topics(self, topology: Topology) -> list[str]:
        return [*self.config.input_topics, topology.handoff_topic]

    def _stop_current(self) -> None:
        if self._query is not None:
            self._stop_query(self._query)

    def _stop_on_signals(self) -> None:
        """SIGINT (Ctrl-C) and SIGTERM alike: stop the query, in another thread (the handler
        runs in the main thread, which may be inside a Py4J call: a second call from it would
        break the connection). The batch in progress is abandoned and redone at the next
        start; what was committed stays."""

        def stop(signum: int, _frame: Any) -> None:
            if self._stop.is_set():
                return  # stopping already
            log.info(
                "signal %d: stopping the query after its current batch (%s)",
                signum,
                signal.Signals(signum).name,
            )
            self._stop.set()
            if self._query is not None:
                self._stop_query(self._query)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop)

    def _stop_query(self, query: StreamingQuery) -> None:
        def stopping() -> None:
            if self._quiet and self._spark is not None:
                # the abandoned batch's killed tasks and aborted write: expected, not errors
                quiet_logs(self._spark, STOPPING_LOGGERS)
            query.stop()

        threading.Thread(target=stopping, name="stop-query", daemon=True).start()

    def _running(self, query: StreamingQuery) -> None:
        """The query a signal stops from now on; one that came while it started stops it now."""
        self._query = query
        if self._stop.is_set():
            self._stop_query(query)


def _available_now_query(spark: SparkSession, spec: QuerySpec) -> StreamingQuery:
    return writer(spark, spec).trigger(availableNow=True).start()


class _ReplayedBatchReportFailed(TemporaryFailure):
    """The query failed as failures.replayed_batch_report_failed says: start it again (were it
    to escape, a temporary failure: exit 75)."""


def _error_text(exc: BaseException) -> str:
    """A query's error message with its JVM trace (PySpark shows the trace only when asked)."""
    trace = getattr(exc, "_stackTrace", None) or ""
    return f"{exc}\n{trace}"


def _checked_client(kind: Any, config: Mapping[str, Any], properties: Mapping[str, str]) -> Any:
    try:
        return kind(dict(config))
    except (KafkaException, ValueError) as exc:
        reason = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
        raise client_error(reason, dict(properties)) from None


def observed(query: StreamingQuery) -> Counter[str]:
    """The hydrator's counters summed over a finished query's batches. (The listener hears of
    batches asynchronously, possibly after awaitTermination returns.)"""
    totals: Counter[str] = Counter()
    for progress in query.recentProgress:
        row = (progress.get("observedMetrics") or {}).get(OBSERVATION)
        if row is not None:
            totals.update({name: int(row[name] or 0) for name in COUNTERS})
    return totals


class _Progress(StreamingQueryListener):
    """Sums the observed counters of every micro-batch and logs a line every interval, with a
    warning when unresolved events or dead letters jump (hydrator/metrics/jumps.py). The line
    comes while the stream is idle too (`_Heartbeat`), so a quiet run still shows it is alive."""

    def __init__(self, interval_s: float, kafka_io: str = "python") -> None:
        self.totals: Counter[str] = Counter()
        self.interval_s = interval_s
        self.kafka_io = kafka_io
        self._lock = threading.Lock()
        self._last_log = time.monotonic()
        self._rows_since = 0
        self._rows = 0
        self._batch: int | None = None
        self._jumps = JumpWatch()

    def onQueryStarted(self, event: Any) -> None:
        log.info("query %s started", event.id)

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        row = progress.observedMetrics.get(OBSERVATION)
        with self._lock:
            if row is not None:
                self.totals.update({name: int(row[name] or 0) for name in COUNTERS})
            self._rows_since += progress.numInputRows
            self._rows += progress.numInputRows
            self._batch = progress.batchId
        self.maybe_log()

    def maybe_log(self) -> None:
        """The progress line, when the interval has passed since the last one."""
        with self._lock:
            now = time.monotonic()
            if now - self._last_log < self.interval_s:
                return
            rate = self._rows_since / (now - self._last_log)
            figures = {"records": self._rows, **self.totals}
            shown = "no batch yet" if self._batch is None else f"batch {self._batch}"
            log.info(
                "%s: %.0f records/s; %s; Kafka I/O %s",
                shown,
                rate,
                describe_counts(figures, ("records", *HEADLINE)),
                self.kafka_io,
                extra={
                    "kafka_io": self.kafka_io,
                    "counts": _nonzero(self.totals),
                    "records": self._rows,
                    "rate": round(rate, 1),
                    **headline_counts(self.totals),
                },
            )
            for jump in self._jumps.check(self.totals, self._rows):
                log.warning(
                    jump.describe(),
                    extra={"counter": jump.counter, "rise": jump.rise, "records": jump.records},
                )
            self._last_log, self._rows_since = now, 0

    def log_totals(self) -> None:
        with self._lock:
            figures = {"records": self._rows, **self.totals}
            log.info(
                "totals: %s",
                describe_counts(figures, ("records", *HEADLINE)),
                extra={"counts": _nonzero(self.totals), "records": self._rows},
            )

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:  # the whole text (query state, plan, traces) when asked for
            log.error("query %s failed: %s", event.id, summary(event.exception))
            log.debug("query %s failed: %s", event.id, event.exception)


def _nonzero(counts: Mapping[str, int]) -> dict[str, int]:
    return {name: n for name, n in counts.items() if n}


class _Heartbeat:
    """Asks for the progress line every second, so that it comes while no batch runs (an idle
    stream, a restart with nothing new) as while batches do."""

    def __init__(self, progress: _Progress) -> None:
        self._progress = progress
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._done.wait(1.0):
            self._progress.maybe_log()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)
