"""One runner's result in the throughput bench (throughput.py), the bare core's too (core.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    key: str
    label: str
    status: str = "ok"  # ok, n/a (...), failed: ...
    processes: str = ""  # how many processes do the work (instances, workers)
    events_per_s: float | None = None
    cpu_us_per_event: float | None = None
    client_cpu_us_per_event: float | None = None  # of cpu_us_per_event: librdkafka's threads
    broker_cpu_us_per_event: float | None = None
    peak_rss_mb: float | None = None
    state_bytes_per_event: float | None = None
    # State as a user pays for it (bench/state_bytes.py): the stores' files, and the changelog
    # the broker keeps once compacted, in the codec the broker keeps its batches in.
    state_disk_bytes_per_event: float | None = None
    state_broker_bytes_per_event: float | None = None
    ratio_to_copy: float | None = None
    ratio_to_spark_copy: float | None = None
    output_records: int | None = None
    output_check: str = ""
    check_examples: list[str] = field(default_factory=list)
    rate_method: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)  # the small and the large run
    per_round: list[dict[str, Any]] = field(default_factory=list)  # with --rounds over 1
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)
