"""The core as an engine drives it, for tests: a Debezium Hydrator, and one input record routed
once and then processed."""

from __future__ import annotations

from hydrator.core import DeadLetter, HydrationSettings, Hydrator, RawRecord, Transition, rejected
from hydrator.events import Read
from hydrator.formats import FormatOptions, codec_for
from state.record import StateRecord


def debezium_hydrator(
    settings: HydrationSettings | None = None, options: FormatOptions | None = None
) -> Hydrator:
    return Hydrator(codec_for("debezium", options), settings)


def engine_step(
    hydrator: Hydrator, state: StateRecord | None, record: RawRecord, now_ms: int
) -> Transition:
    """What an engine does with an input record: its key once (a bad one is a dead letter and
    leaves `state` as it was), then the key's state through the core, with the one Read of the
    record both take."""
    read = Read(record)
    key = hydrator.route(read)
    if isinstance(key, DeadLetter):
        return rejected(key, state)
    return hydrator.process(state, read, key, now_ms)
