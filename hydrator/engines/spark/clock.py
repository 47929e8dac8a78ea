"""Processing time for the Spark engine: timeouts count the time the engine runs, not downtime.

Spark's processing-time timeouts are absolute wall-clock moments: after an outage longer than a
timeout, they all fire in the first batch, before that batch's handoffs have been read. So the
group function does not read the wall clock as it is: it reads `wall - offset`, where the offset
is the downtime accumulated over the query's life. The driver keeps it in small files in the
checkpoint directory (it lives and goes with the state it dates), with a heartbeat: at start, the
time since the last heartbeat is downtime and is added to the offset. A Spark timeout that fires
by the wall clock before its deadline by this clock re-arms instead of releasing (the core's
`tick` leaves a state whose deadline has not come unchanged).

The heartbeat goes to two files in turn, each reading numbered: a driver killed while writing one
(HDFS and local disks truncate a file before writing it) leaves the other intact, and the start
takes the readable one with the higher number. A checkpoint without either starts with offset 0:
its states were dated by the wall clock.

And no timeout fires before the query has read the inputs and the handoff topic up to the ends
they had when the engine started (`CatchUpGate`): the driver notes those ends, watches each
batch's end offsets, and opens the gate once a finished batch has reached them all; until then a
group whose timeout fires keeps its state and re-arms. The open gate reaches the executors as a
file Spark ships with every later task (`SparkContext.addFile`), so no executor needs to reach
the driver's disk or the checkpoint's filesystem from Python.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark import SparkFiles
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from hydrator.engines.spark.kafka_offsets import offsets_from_json

log = logging.getLogger(__name__)

# Written in turn; the first keeps the name of the single file earlier versions wrote.
CLOCK_FILES = ("hydrator-clock.json", "hydrator-clock-2.json")
# How often the driver notes it is alive: a crash counts at most this much running time as
# downtime (timeouts then fire that much later, never earlier).
HEARTBEAT_S = 1.0


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class SmallFiles(Protocol):
    """Where the ledger keeps its files (checkpoint_dir.CheckpointDirectory)."""

    location: str

    def read(self, name: str) -> bytes | None: ...

    def write(self, name: str, data: bytes) -> None: ...


@dataclass(frozen=True)
class ClockReading:
    offset_ms: int  # downtime so far: processing time = wall time - offset
    alive_ms: int  # the last heartbeat, wall time
    number: int = 0  # which reading is newer (files from before the numbering count 0)

    def to_json(self) -> bytes:
        return json.dumps(
            {"offset_ms": self.offset_ms, "alive_ms": self.alive_ms, "number": self.number}
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ClockReading:
        """Raises ValueError for anything but a reading."""
        try:
            fields = json.loads(data)
            return cls(
                int(fields["offset_ms"]), int(fields["alive_ms"]), int(fields.get("number", 0))
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a clock reading ({exc!r})") from None


def latest_reading(readings: Iterable[ClockReading | None]) -> ClockReading | None:
    found = [r for r in readings if r is not None]
    return max(found, key=lambda r: r.number) if found else None


def resumed_offset(last: ClockReading | None, now_ms: int) -> int:
    """The offset for a run starting at `now_ms`: the last run's plus the downtime since its last
    heartbeat (none when the wall clock went back)."""
    if last is None:
        return 0
    return last.offset_ms + max(0, now_ms - last.alive_ms)


class DowntimeLedger:
    """The offset between the wall clock and the processing clock, kept across runs."""

    def __init__(self, files: SmallFiles) -> None:
        self._files = files
        self.offset_ms = 0
        self._number = 0
        self._stopped = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def start(self) -> int:
        """Add the downtime since the last run's last heartbeat to the offset, start the
        heartbeat, and return the offset (processing time = wall time - offset)."""
        now = wall_ms()
        last = latest_reading(self._read(name) for name in CLOCK_FILES)
        self.offset_ms = resumed_offset(last, now)
        if last is not None:
            self._number = last.number
            downtime = self.offset_ms - last.offset_ms
            if downtime:
                log.info("processing clock: %.1f s of downtime are not counted", downtime / 1000)
        self._write(now)
        self._stopped.clear()
        self._heartbeat = threading.Thread(target=self._beat, name="hydrator-clock", daemon=True)
        self._heartbeat.start()
        return self.offset_ms

    def stop(self) -> None:
        self._stopped.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        self._write_or_warn()

    def _beat(self) -> None:
        while not self._stopped.wait(HEARTBEAT_S):
            self._write_or_warn()

    def _write_or_warn(self) -> None:
        try:
            self._write(wall_ms())
        except OSError as exc:  # a full disk must not kill the query; timeouts fire late
            log.warning("processing clock: %s", exc)

    def _read(self, name: str) -> ClockReading | None:
        data = self._files.read(name)
        if data is None:
            return None
        try:
            return ClockReading.from_json(data)
        except ValueError as exc:
            # Torn by a crash mid-write (the other file then holds the previous reading), or
            # damaged: without any reading the clock starts over from the wall clock.
            log.warning("processing clock: ignoring %s/%s: %s", self._files.location, name, exc)
            return None

    def _write(self, alive_ms: int) -> None:
        self._number += 1
        reading = ClockReading(self.offset_ms, alive_ms, self._number)
        self._files.write(CLOCK_FILES[self._number % 2], reading.to_json())


class CatchUpGate:
    """Driver side: the ends to reach; `on_open` runs once they all are."""

    def __init__(self, ends: Mapping[tuple[str, int], int], on_open: Callable[[], None]) -> None:
        self._pending = {tp: end for tp, end in ends.items() if end > 0}
        self._on_open = on_open
        if self.is_open:
            on_open()

    @property
    def is_open(self) -> bool:
        return not self._pending

    def reached(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """A finished batch read up to `offsets` (next offset to read per partition)."""
        if self.is_open:
            return
        for tp, offset in offsets.items():
            if tp in self._pending and offset >= self._pending[tp]:
                del self._pending[tp]
        if self.is_open:
            log.info("caught up with the ends at start: timeouts may fire")
            self._on_open()


class ShippedGate:
    """One engine run's gate as the executors see it: a file named after the run that Spark
    ships with every task started after it is added. `key` is what the group function gets."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        # One engine run, one gate: a file an earlier run shipped never opens this one.
        self.run = uuid.uuid4().hex
        self.name = f"hydrator-catch-up-{self.run}"
        self._dir: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.run

    def open(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="hydrator-gate-")
        path = os.path.join(self._dir, self.name)
        with open(path, "w") as gate:
            gate.write("open")
        self._spark.sparkContext.addFile(path)

    def close(self) -> None:
        """At the end of the run: the file is served from the driver's disk until then."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


class CatchUpListener(StreamingQueryListener):
    """Feeds each finished batch's source end offsets to the gate."""

    def __init__(self, gate: CatchUpGate) -> None:
        self._gate = gate

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        if self._gate.is_open:
            return
        for source in event.progress.sources:
            try:
                offsets = offsets_from_json(json.loads(source.endOffset))
            except (ValueError, TypeError, AttributeError):
                continue  # not our Kafka source's offsets
            self._gate.reached(offsets)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


# Executor side: runs seen open, per Python worker (a gate never closes again).
_OPEN_RUNS: set[str] = set()


def shipped_files_dir() -> str | None:
    """Where Spark puts the files it ships with tasks (None outside Spark)."""
    try:
        return SparkFiles.getRootDirectory()
    except Exception:  # no SparkContext, no worker: nothing was shipped
        return None


def closed_gate() -> tuple[str, str]:
    """A gate no file opens: a query given it fires no timeout (each re-arms for what remains)."""
    run = uuid.uuid4().hex
    return f"hydrator-closed-{run}", run


def gate_is_open(name: str, run: str) -> bool:
    """Whether the driver has opened the gate of engine run `run` (shipped as file `name`). A
    missing file counts as closed: timeouts then wait, which is never wrong, only late."""
    if run in _OPEN_RUNS:
        return True
    root = shipped_files_dir()
    if root is not None and os.path.exists(os.path.join(root, name)):
        _OPEN_RUNS.add(run)
        return True
    return False
