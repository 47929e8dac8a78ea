"""The functional core: pure hydration rules, no I/O, shared by every engine. It knows formats
only through the Codec it is given (hydrator.events)."""

from hydrator.core.hydrator import Hydrator, rejected
from hydrator.core.records import DeadLetter, OutputRecord, Transition
from hydrator.core.settings import HydrationSettings, OnStale, OnUnresolved, UnresolvedColumnsError
from hydrator.events import RawRecord, Read
from state.handoff import Handoff

__all__ = [
    "DeadLetter",
    "Handoff",
    "HydrationSettings",
    "Hydrator",
    "OnStale",
    "OnUnresolved",
    "OutputRecord",
    "RawRecord",
    "Read",
    "Transition",
    "UnresolvedColumnsError",
    "rejected",
]
