"""The bare core on the same workload, in this process: `Hydrator.process` over every event with
a dict for state and no Kafka. What an engine costs on top of it is its shell."""

from __future__ import annotations

import time
from itertools import islice

from bench.workload import Checker, Workload

CHUNK = 5_000  # events made at a time, outside the timed loop


def core_result(workload: Workload):  # -> throughput.Result (imported late: no cycle)
    from bench.throughput import Result
    from hydrator.core import Hydrator
    from hydrator.events import RawRecord, Read
    from hydrator.formats import codec_for

    hydrator = Hydrator(codec_for("debezium"))
    states: dict = {}
    checker = Checker(workload)
    wall = cpu = 0.0
    events = workload.events()
    offset = 0
    while chunk := list(islice(events, CHUNK)):
        raws = []
        for _, key, value in chunk:
            raws.append(RawRecord("bench.public.customers", 0, offset, key, value))
            offset += 1
        emitted = []
        began, began_cpu = time.perf_counter(), time.process_time()
        for raw in raws:
            read = Read(raw)  # as an engine does: routing and hydration share one read
            key = hydrator.route(read)  # every key of the workload decodes
            step = hydrator.process(states.get(key), read, key, 0)  # type: ignore[arg-type]
            if key is not None:
                states[key] = step.state
            emitted.extend(step.emitted)
        cpu += time.process_time() - began_cpu
        wall += time.perf_counter() - began
        for out in emitted:
            checker.check(out.value)
    verdict = checker.finish()
    return Result(
        "core",
        "bare core (in-process, dict state, no Kafka)",
        events_per_s=round(offset / wall),
        cpu_us_per_event=round(cpu / offset * 1e6, 1),
        output_records=verdict.records,
        output_check=verdict.summary(),
        check_examples=verdict.examples,
        processes="1 (in-process)",
        rate_method=f"in-process loop, {wall:.3f} s",
    )
