"""The knobs of the hydration rules; engines and the CLI build one of these (a format's own
options are hydrator.formats.options.FormatOptions)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hydrator.errors import HydratorError


class OnStale(StrEnum):
    DROP = "drop"
    FORWARD = "forward"


class OnUnresolved(StrEnum):
    KEEP = "keep"
    NULL = "null"
    DROP = "drop"
    DLQ = "dlq"
    FAIL = "fail"


class UnresolvedColumnsError(HydratorError, RuntimeError):
    """Raised under `--on-unresolved fail`: the engine must stop without committing."""


@dataclass(frozen=True, slots=True)
class HydrationSettings:
    fill_before: bool = True
    on_stale: OnStale = OnStale.DROP
    on_unresolved: OnUnresolved = OnUnresolved.KEEP
    tombstone_retention_ms: int = 24 * 3600 * 1000
    handoff_timeout_ms: int = 60 * 1000
    state_ttl_ms: int | None = None
    max_record_bytes: int = 16 * 1024 * 1024
    # A key's records wait (parked) while its key change awaits the old image: bounded, since
    # they are kept in the key's state.
    max_parked_records: int = 1000
    max_parked_bytes: int = 8 * 1024 * 1024
    # Header `hydrator.changed` on every hydrated output (`--no-changed-header` turns it off).
    changed_header: bool = True
    # (input topic, table mark) for each input whose table `hydrator state bootstrap` read from
    # Postgres (hydrator.core.visibility.TableMark): the engines read them from the bootstrap's
    # snapshots topic when they start (plain tuples: Spark pickles the settings).
    table_snapshots: tuple[tuple[str, tuple[int, ...]], ...] = ()
