"""What the bench measures from outside a runner: the CPU time and memory of its process tree,
the growth of its output topic, and what it wrote to Kafka and to disk.

Nothing here trusts the runner's own accounting: a runner is a process tree (a Spark driver
starts a JVM, which starts Python workers), sampled with psutil.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from hydrator.kafka import consumed
from hydrator.kafka.offsets import from_the_start

SAMPLE_INTERVAL_S = 0.1
# librdkafka names the threads it starts rdk:main, rdk:broker<N>, rdk:bg, ...
CLIENT_THREAD_PREFIX = "rdk:"


@dataclass
class TreeSamples:
    """(wall time, cumulative CPU seconds, RSS bytes) of a process tree, in time order; with
    the cumulative CPU seconds of its librdkafka threads (`client_cpu_s`) at the same times."""

    times: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    client_cpu_s: list[float] = field(default_factory=list)

    def cpu_at(self, when: float) -> float:
        """CPU seconds the tree had used by `when`, interpolated between samples."""
        if not self.times:
            return 0.0
        i = bisect.bisect_left(self.times, when)
        if i == 0:
            return self.cpu_s[0]
        if i >= len(self.times):
            return self.cpu_s[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.cpu_s[i - 1], self.cpu_s[i]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c1

    @property
    def peak_rss(self) -> int:
        return max(self.rss, default=0)


class TreeSampler:
    """Samples a process and all its descendants every SAMPLE_INTERVAL_S in a thread.

    CPU is the sum over every process ever seen of its own user + system time, as last sampled
    (a process living less than one interval can be missed; one that exits loses at most its
    last interval). RSS is the sum over the processes alive at a sample. The threads librdkafka
    starts (named `rdk:...`: the broker threads that compress, send and fetch) are summed apart
    the same way: what a runner's Kafka client costs beside its own code.
    """

    def __init__(self, pid: int) -> None:
        self._root = psutil.Process(pid)
        self._cpu: dict[tuple[int, float], float] = {}
        self._client_cpu: dict[tuple[int, float, int], float] = {}
        self._thread_names: dict[tuple[int, int], str] = {}
        self.samples = TreeSamples()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> TreeSamples:
        self._stop.set()
        self._thread.join()
        return self.samples

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(SAMPLE_INTERVAL_S):
                return

    def _sample(self) -> None:
        try:
            tree = [self._root, *self._root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        rss = 0
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    rss += process.memory_info().rss
                    started = process.create_time()
                    self._cpu[(process.pid, started)] = times.user + times.system
                    threads = process.threads()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            for thread in threads:
                if self._thread_name(process.pid, thread.id).startswith(CLIENT_THREAD_PREFIX):
                    key = (process.pid, started, thread.id)
                    self._client_cpu[key] = thread.user_time + thread.system_time
        self.samples.times.append(time.time())
        self.samples.cpu_s.append(sum(self._cpu.values()))
        self.samples.rss.append(rss)
        self.samples.client_cpu_s.append(sum(self._client_cpu.values()))

    @property
    def client_threads_seen(self) -> int:
        """How many librdkafka threads the samples found, over the run."""
        return len(self._client_cpu)

    def _thread_name(self, pid: int, tid: int) -> str:
        name = self._thread_names.get((pid, tid))
        if name is None:
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                return ""  # gone, or no /proc: asked again at the next sample
            self._thread_names[(pid, tid)] = name
        return name


class OutputWatch:
    """Polls a topic's high watermarks (read_uncommitted) in a thread: the progress bar's count,
    and the latency bench's wait for a runner to catch up.

    On Tansu a watermark is the base offset of the partition's last record batch + 1, and
    transaction markers take offsets too: the sum is near, not equal to, the record count.
    """

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, on_change: Callable[[int], object]
    ) -> None:
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-watch", "enable.auto.commit": False}
        )
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self._on_change = on_change
        self.series: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-watch", daemon=True)

    def start(self) -> OutputWatch:
        self._thread.start()
        return self

    def stop(self) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join()
        self._poll()
        self._consumer.close()
        return self.series

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self._poll()

    def _poll(self) -> None:
        try:
            total = sum(
                self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1]
                for tp in self._partitions
            )
        except KafkaException:
            return
        if not self.series or total != self.series[-1][1]:
            self.series.append((time.time(), total))
            self._on_change(total)


@dataclass
class TopicScan:
    records: int = 0
    bytes: int = 0
    first_timestamp_ms: int | None = None
    last_timestamp_ms: int | None = None


def scan_topic(
    bootstrap: str,
    topic: str,
    on_value: Callable[[bytes | None], None] | None = None,
    committed_only: bool = True,
    timeout_s: float = 600,
) -> TopicScan:
    """Reads a whole topic once (each partition to where the fetch reports its end), passing
    each value to `on_value`; counts records and key + value bytes, and keeps the first and last
    record timestamps."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-scan",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.message.max.bytes": 16 * 1024 * 1024,
        }
    )
    scan = TopicScan()
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        partitions = set(metadata.partitions)
        consumer.assign(from_the_start(topic, partitions))
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        first, last = None, None
        while at_end != partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: no end reached for {sorted(partitions - at_end)}")
            for msg in consumer.consume(2000, 0.2):
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    at_end.add(consumed.partition(msg))
                    continue
                at_end.discard(consumed.partition(msg))
                value = msg.value()
                scan.records += 1
                scan.bytes += len(value or b"") + len(msg.key() or b"")
                stamp = msg.timestamp()[1]
                first = stamp if first is None else min(first, stamp)
                last = stamp if last is None else max(last, stamp)
                if on_value is not None:
                    on_value(value)
        scan.first_timestamp_ms, scan.last_timestamp_ms = first, last
    finally:
        consumer.close()
    return scan


def topics_named(bootstrap: str, wanted: Callable[[str], bool]) -> list[str]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return sorted(name for name in metadata.topics if wanted(name))


def directory_bytes(paths: Iterable[Path]) -> int:
    return sum(
        f.stat().st_size for path in paths if path.exists() for f in path.rglob("*") if f.is_file()
    )
