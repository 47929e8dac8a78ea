"""What the bench says about the machine it ran on, so that runs of different days compare.

The same machine, quiet both times, has run the bare core 1.8x faster one day than another, and
the load average does not show it. A fixed pure-Python loop does: the figure
`python_loop_mops` (million loop steps a second, best of three) scales with the speed the
engine's own Python code gets, so two runs compare when it is about the same.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

CALIBRATION_STEPS = 2_000_000


def python_loop_mops(steps: int = CALIBRATION_STEPS, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        total = 0
        for i in range(steps):
            total += i
        best = min(best, time.perf_counter() - began)
    return round(steps / best / 1e6, 1)


def machine_facts() -> dict[str, Any]:
    """Taken before a run starts: the load average then, the machine's Python speed, and
    whether the engine's core is compiled (docs/operations.md, "The compiled core")."""
    from hydrator import core_build

    return {
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": sys.version.split()[0],
        "python_loop_mops": python_loop_mops(),
        "core": core_build(),
    }


def describe(machine: dict[str, Any]) -> str:
    core = f"core {machine['core']}, " if "core" in machine else ""
    return (
        f"{machine['cpus']} CPUs, load average at start {machine['load_average_at_start'][0]}, "
        f"{core}Python speed {machine['python_loop_mops']} M loop steps/s"
    )
