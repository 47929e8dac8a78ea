"""The marginal method's arithmetic: a runner drains a small and a large backlog of the same
workload (the small one a prefix of the large: the same keys), each run timed from its process's
start to its exit with every output committed. What both runs pay once — start-up, group joins,
restore, the final commit, an idle wait before stopping — cancels in the difference:

    events/s     = (N2 - N1) / (T2 - T1)
    CPU µs/event = (C2 - C1) / (N2 - N1)   (C: the process tree's CPU seconds, children included)

Pure: nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

SMALL_SHARE = 0.25  # of the large backlog, by default


@dataclass(frozen=True)
class Timing:
    """One run of one runner over a backlog of `events` events."""

    events: int
    wall_s: float  # process start to exit
    cpu_s: float  # the process tree's user + system CPU, every descendant included
    broker_cpu_s: float | None = None  # the local broker's CPU over the same run
    client_cpu_s: float | None = None  # of cpu_s, the runner's librdkafka threads (sampled)


@dataclass(frozen=True)
class Marginal:
    events_per_s: float | None
    cpu_us_per_event: float | None
    broker_cpu_us_per_event: float | None
    problem: str | None = None  # why a figure is missing
    client_cpu_us_per_event: float | None = None


def small_backlog(events: int, keys: int, share: float = SMALL_SHARE) -> int:
    """The small backlog's size: a share of the large one, yet every key inserted (the workload
    inserts each key before it updates any), so both runs restore and hold the same keys."""
    small = max(keys, int(events * share))
    if small >= events:
        raise ValueError(
            f"--events ({events}) must exceed the small backlog ({small}: at least --keys); "
            "give more --events"
        )
    return small


def marginal(small: Timing, large: Timing) -> Marginal:
    added = large.events - small.events
    if added <= 0:
        raise ValueError("the large backlog must hold more events than the small one")
    longer = large.wall_s - small.wall_s
    cpu = (large.cpu_s - small.cpu_s) / added * 1e6
    broker = _per_event(small.broker_cpu_s, large.broker_cpu_s, added)
    client = _per_event(small.client_cpu_s, large.client_cpu_s, added)
    if longer <= 0:
        return Marginal(
            None,
            None,
            broker,
            f"the large backlog took no longer than the small one ({longer:+.2f} s): the "
            "difference is lost in the noise; give more --events",
            client,
        )
    return Marginal(round(added / longer), round(cpu, 1), broker, None, client)


def _per_event(small_s: float | None, large_s: float | None, added: int) -> float | None:
    """µs of the added events, from the CPU seconds of both runs (None when either is)."""
    if small_s is None or large_s is None:
        return None
    return round((large_s - small_s) / added * 1e6, 1)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)
