"""`python -m bench profile`: the embedded engine in this process under cProfile, on the bench's
workload pre-loaded into a local broker (`--available-now`, exactly-once on). The profile is
for reading with `python -m pstats` or snakeviz; the top of it is printed."""

from __future__ import annotations

import cProfile
import pstats
import tempfile
import time
import uuid
from pathlib import Path

from bench.broker import BrokerChoice, broker, create_topics
from bench.broker import preload as preload_topic
from bench.workload import Workload, WorkloadShape


def run_profile(shape: WorkloadShape, partitions: int, choice: BrokerChoice, out: Path) -> None:
    from hydrator.config import EmbeddedSettings, RunConfig
    from hydrator.engines.embedded import EmbeddedEngine
    from hydrator.kafka.client_config import ClientSettings

    workload = Workload(shape)
    with broker(choice) as kafka, tempfile.TemporaryDirectory() as state_dir:
        topic = f"bench-prof-{uuid.uuid4().hex[:8]}.public.customers"
        create_topics(kafka.bootstrap_servers, [topic], partitions)
        events = ((key, value) for _, key, value in workload.events())
        preload_topic(kafka.bootstrap_servers, topic, events, lambda: None)
        config = RunConfig(
            kafka=ClientSettings(kafka.bootstrap_servers),
            input_topics=(topic,),
            output_topic=f"{topic}.out",
            application_id=f"bench-prof-{uuid.uuid4().hex[:6]}",
            available_now=True,
            progress_interval_s=3600,
        )
        engine = EmbeddedEngine(config, EmbeddedSettings(state_dir=Path(state_dir)))
        profiler = cProfile.Profile()
        began = time.perf_counter()
        with profiler:
            engine.run()
        wall = time.perf_counter() - began
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(out)
    print(
        f"{engine.counts['records']:,} records in {wall:.1f} s (start-up included); profile: {out}"
    )
    pstats.Stats(str(out)).sort_stats("cumulative").print_stats(30)
