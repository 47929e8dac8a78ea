"""Processing time for the Spark engine: timeouts count the time the engine runs, not downtime.

Spark's processing-time timeouts are absolute wall-clock moments: after an outage longer than a
timeout, they all fire in the first batch, before that batch's handoffs have been read. So the
group function does not read the wall clock as it is: it reads `wall - offset`, where the offset
is the downtime accumulated over the query's life. The driver keeps it in a small file under
the checkpoint directory (it lives and goes with the state it dates), with a heartbeat: at
start, the time since the last heartbeat is downtime and is added to the offset. A Spark timeout
that fires by the wall clock before its deadline by this clock re-arms instead of releasing
(the core's `tick` leaves a state whose deadline has not come unchanged).

A checkpoint without the file starts with offset 0: its states were dated by the wall clock.

And no timeout fires before the query has read the inputs and the handoff topic up to the ends
they had when the engine started (`CatchUpGate`): the driver notes those ends, watches each
batch's end offsets, and opens the gate (a file next to the clock's) once a finished batch has
reached them all; until then a group whose timeout fires keeps its state and re-arms.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from hydrator.engines.spark.kafka_offsets import offsets_from_json

log = logging.getLogger(__name__)

CLOCK_FILE = "hydrator-clock.json"
GATE_FILE = "hydrator-catch-up.json"
# How often the driver notes it is alive: a crash counts at most this much running time as
# downtime (timeouts then fire that much later, never earlier).
HEARTBEAT_S = 1.0


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class DowntimeLedger:
    """The offset between the wall clock and the processing clock, kept across runs."""

    def __init__(self, checkpoint: Path) -> None:
        self._path = Path(checkpoint) / CLOCK_FILE
        self.offset_ms = 0
        self._stopped = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def start(self) -> int:
        """Add the downtime since the last run's last heartbeat to the offset, start the
        heartbeat, and return the offset (processing time = wall time - offset)."""
        now = wall_ms()
        saved = self._read()
        if saved is not None:
            offset, alive = saved
            downtime = max(0, now - alive)
            self.offset_ms = offset + downtime
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
        self._write(wall_ms())

    def _beat(self) -> None:
        while not self._stopped.wait(HEARTBEAT_S):
            try:
                self._write(wall_ms())
            except OSError as exc:  # a full disk must not kill the query; timeouts fire late
                log.warning("processing clock: cannot write %s: %s", self._path, exc)

    def _read(self) -> tuple[int, int] | None:
        try:
            data = json.loads(self._path.read_text())
            return int(data["offset_ms"]), int(data["alive_ms"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            # Unreadable: start over from the wall clock (as a checkpoint from before the file).
            log.warning("processing clock: ignoring unreadable %s (%s)", self._path, exc)
            return None

    def _write(self, alive_ms: int) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        partial = self._path.with_suffix(".tmp")
        partial.write_text(json.dumps({"offset_ms": self.offset_ms, "alive_ms": alive_ms}))
        os.replace(partial, self._path)


class CatchUpGate:
    """Driver side: the ends to reach, and the gate file the group function reads."""

    def __init__(self, checkpoint: Path, ends: Mapping[tuple[str, int], int]) -> None:
        self.path = Path(checkpoint) / GATE_FILE
        # One engine run, one gate: a file left by an earlier run never opens this one.
        self.run = uuid.uuid4().hex
        self._pending = {tp: end for tp, end in ends.items() if end > 0}
        self._write()

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
            self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps({"run": self.run, "open": self.is_open}))
        os.replace(partial, self.path)


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


def gate_is_open(path: str, run: str) -> bool:
    """Whether the driver has opened the gate of engine run `run`. An unreadable or missing
    file counts as closed: timeouts then wait, which is never wrong, only late."""
    if run in _OPEN_RUNS:
        return True
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    if isinstance(data, dict) and data.get("run") == run and data.get("open") is True:
        _OPEN_RUNS.add(run)
        return True
    return False
