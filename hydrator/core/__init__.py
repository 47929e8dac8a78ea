"""The functional core: pure hydration rules, no I/O, shared by every engine."""

from hydrator.core.hydrator import Hydrator
from hydrator.core.records import DeadLetter, Handoff, OutputRecord, RawRecord, Transition
from hydrator.core.settings import HydrationSettings, OnStale, OnUnresolved, UnresolvedColumnsError

__all__ = [
    "DeadLetter",
    "Handoff",
    "HydrationSettings",
    "Hydrator",
    "OnStale",
    "OnUnresolved",
    "OutputRecord",
    "RawRecord",
    "Transition",
    "UnresolvedColumnsError",
]
