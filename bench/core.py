"""The bare core on the same workload, in this process: `Hydrator.process` over every event with
a dict for state and no Kafka. What an engine costs on top of it is its shell.

`python -m bench core` times it alone: the events are made first, then `--passes` passes run
over them, each with a new Hydrator and empty state (the same work every pass), and the best
pass is reported. `--instructions` counts instead of timing: it runs the command twice under
valgrind's callgrind, with one pass and with two, and the difference is one pass's
instructions, which the machine's load does not move (start-up and making the events cancel).
`--floor` runs the peer's rule (`Floor`) instead of the core, for the least any core costs.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from bench.peer_rule import hydrate
from bench.result import Result
from bench.workload import Checker, Workload, WorkloadShape

CHUNK = 5_000  # events made at a time, outside the timed loop
TOPIC = "bench.public.customers"


@dataclass
class Pass:
    wall_s: float
    cpu_s: float
    events: int

    def us_per_event(self) -> tuple[float, float]:
        """(wall, CPU) µs per event."""
        return self.wall_s / self.events * 1e6, self.cpu_s / self.events * 1e6


def records(workload: Workload) -> Iterator[list]:  # lists of RawRecord, CHUNK at a time
    from hydrator.events import RawRecord

    events = workload.events()
    offset = 0
    while chunk := list(islice(events, CHUNK)):
        raws = []
        for _, key, value in chunk:
            raws.append(RawRecord(TOPIC, 0, offset, key, value))
            offset += 1
        yield raws


class Core:
    """One pass's Hydrator and state; `run` times a batch of records through it."""

    def __init__(self) -> None:
        from hydrator.core import Hydrator
        from hydrator.formats import codec_for

        self.hydrator = Hydrator(codec_for("debezium"))
        self.states: dict = {}

    def run(self, raws: list) -> tuple[Pass, list]:
        from hydrator.core import DeadLetter
        from hydrator.events import Read

        hydrator, states = self.hydrator, self.states
        emitted: list = []
        began, began_cpu = time.perf_counter(), time.process_time()
        for raw in raws:
            read = Read(raw)  # as an engine does: routing and hydration share one read
            key = hydrator.route(read)
            if isinstance(key, DeadLetter):  # every key of the workload decodes
                raise RuntimeError(f"the workload's key does not decode: {key.reason}")
            step = hydrator.process(states.get(key), read, key, 0)
            if key is not None:
                states[key] = step.state
            emitted.extend(step.emitted)
        cpu = time.process_time() - began_cpu
        return Pass(time.perf_counter() - began, cpu, len(raws)), emitted


class Floor:
    """The peer's rule (bench/peer_rule.py) in place of the core: one parse and one dump of each
    event with a dict for state, the least a hydrator of JSON documents does. The core's time
    over the floor's is what the rules, the codec and the state records cost beyond it."""

    def __init__(self) -> None:
        self.states: dict = {}

    def run(self, raws: list) -> tuple[Pass, list]:
        states = self.states
        emitted: list = []
        began, began_cpu = time.perf_counter(), time.process_time()
        for raw in raws:
            output, stored = hydrate(raw.value, states.get(raw.key))
            if stored is not None:
                states[raw.key] = stored
            if output is not None:
                emitted.append(output)
        cpu = time.process_time() - began_cpu
        return Pass(time.perf_counter() - began, cpu, len(raws)), emitted


def core_result(workload: Workload) -> Result:
    from hydrator import core_build

    core = Core()
    checker = Checker(workload)
    wall = cpu = 0.0
    events = 0
    for raws in records(workload):
        timed, emitted = core.run(raws)
        wall, cpu, events = wall + timed.wall_s, cpu + timed.cpu_s, events + timed.events
        for out in emitted:
            checker.check(out.value)
    verdict = checker.finish()
    return Result(
        "core",
        f"bare core (in-process, dict state, no Kafka; {core_build()})",
        events_per_s=round(events / wall),
        cpu_us_per_event=round(cpu / events * 1e6, 1),
        output_records=verdict.records,
        output_check=verdict.summary(),
        check_examples=verdict.examples,
        processes="1 (in-process)",
        rate_method=f"in-process loop, {wall:.3f} s",
    )


def timed_passes(shape: WorkloadShape, passes: int, floor: bool = False) -> list[Pass]:
    """`passes` passes over the same events (of the core, or with `floor` of `Floor`); the first
    one's outputs are checked."""
    workload = Workload(shape)
    checker = Checker(workload)
    batches = list(records(workload))  # the truth is complete before any pass
    result = []
    for number in range(passes):
        runner = Floor() if floor else Core()
        wall = cpu = 0.0
        for raws in batches:
            timed, emitted = runner.run(raws)
            wall, cpu = wall + timed.wall_s, cpu + timed.cpu_s
            if number == 0:
                for out in emitted:
                    checker.check(out if floor else out.value)
        result.append(Pass(wall, cpu, workload.shape.events))
    summary = checker.finish().summary()
    if not summary.startswith("ok"):
        raise SystemExit(f"python -m bench core: the outputs are {summary}")
    return result


def instructions(argv: list[str], events: int, out_dir: Path, name: str = "core") -> float:
    """Instructions per event: callgrind's count of this command with two passes less its count
    with one. The profiles stay in `out_dir` as `<name>-1` and `<name>-2.callgrind`
    (callgrind_annotate reads them)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = []
    for passes in (1, 2):
        out = out_dir / f"{name}-{passes}.callgrind"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "bench",
                "core",
                *argv,
                "--passes",
                str(passes),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
        counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / events
