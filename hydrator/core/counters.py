"""The counters of a run, in one list: the core emits most of them (`Transition.counts`), the
engines add their own, and the progress line, the Spark engine's observed metrics and the
Prometheus exporter all read this list rather than keeping their own.

A counter only grows. A name missing here would be dropped by the Spark engine (its observed
metrics have one column per name) and never exported; tests/unit/core/test_counters.py checks that
every name the core and the engines count is listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Source = Literal["core", "embedded", "spark", "engines"]


@dataclass(frozen=True)
class CounterSpec:
    name: str
    help: str
    source: Source  # who counts it: the core (both engines), one engine, or each engine itself


def _core(name: str, help: str) -> CounterSpec:
    return CounterSpec(name, help, "core")


def _embedded(name: str, help: str) -> CounterSpec:
    return CounterSpec(name, help, "embedded")


def _spark(name: str, help: str) -> CounterSpec:
    return CounterSpec(name, help, "spark")


def _engines(name: str, help: str) -> CounterSpec:
    return CounterSpec(name, help, "engines")


COUNTERS: tuple[CounterSpec, ...] = (
    # -- the core --------------------------------------------------------------------------------
    _core("events", "Change events hydrated (applied to their key's state)."),
    _core("filled_columns", "Columns filled from the stored row image."),
    _core("unresolved_events", "Hydrated events with columns no stored image could fill."),
    _core("unresolved_columns", "Columns no stored image could fill."),
    _core("unresolved_dropped", "Unresolved events dropped (--on-unresolved drop)."),
    _core("stale_dropped", "Events at or before the stored position, dropped (--on-stale drop)."),
    _core("stale_forwarded", "Stale events forwarded unchanged (--on-stale forward)."),
    _core("dead_letters", "Records written to the dead-letter topic, for any reason."),
    _core("passthrough", "Records passed through unchanged (Kafka tombstones)."),
    _core("parked", "Records held back behind a key change waiting for its old image."),
    _core("parked_overflow", "Records past --max-parked-records/--max-parked-bytes (to the DLQ)."),
    _core("redelivered_parked", "Redeliveries of a record already held back, ignored."),
    _core("handoffs_sent", "Key changes whose old row image was handed to the new key."),
    _core("handoffs_applied", "Handoffs that released the records waiting for them."),
    _core("handoffs_pending", "Handoffs that arrived before their CREATE and wait in state."),
    _core("handoffs_unneeded", "Handoffs that came after the new key had moved past them."),
    _core("handoff_timeouts", "Key changes whose old image did not come within --handoff-timeout."),
    _core("handoffs_expired", "Waiting handoffs dropped unclaimed after --handoff-timeout."),
    _core("tombstones_expired", "Delete tombstones forgotten after --tombstone-retention."),
    _core("states_expired", "Keys forgotten after --state-ttl without a change."),
    _core(
        "reselected_columns_exact",
        "Columns filled from a re-select, proven to be the row's value at the event.",
    ),
    _core(
        "reselected_columns_current",
        "Columns filled from a re-select of a row written since the event (may be newer).",
    ),
    _core(
        "bootstrap_older_events",
        "Events older than their key's bootstrapped image: out unfilled, marked hydrator.stale.",
    ),
    _core("bootstrap_applied_events", "First events applied over a bootstrapped image."),
    _core("tick_failures", "Timer steps that failed on a state (its parked records to the DLQ)."),
    # -- the embedded engine ---------------------------------------------------------------------
    _embedded("records", "Input records read (handoff records not included)."),
    _embedded("handoffs_received", "Handoff records read from the handoff topic."),
    _embedded(
        "handoffs_local",
        "Handoffs applied by the process that made them, without the handoff topic.",
    ),
    _embedded("commits", "Transactions committed."),
    _embedded("restarts", "In-process restarts after a Kafka failure."),
    _embedded("oversize_records", "Outputs or handoffs too large for their topic (to the DLQ)."),
    _embedded("oversize_states", "Keys forgotten because their state outgrew the changelog."),
    _embedded("damaged_stores", "Local stores found damaged, set aside and rebuilt."),
    _embedded(
        "storage_failures", "Batches aborted and redone because a local store failed under them."
    ),
    _embedded("changelog_records_skipped", "Changelog records that could not be decoded."),
    _embedded(
        "large_values_collected_at_open",
        "Large values no row referred to, removed from a store rebuilt from the changelog.",
    ),
    _embedded(
        "large_values_missing",
        "Large values a row referred to that the changelog lacked (at a rebuild).",
    ),
    _embedded(
        "dlq_left",
        "hydrator dlq replay: dead letters the filters left out, copied on for a later replay.",
    ),
    _embedded(
        "dlq_unreplayable",
        "hydrator dlq replay: dead-letter records that hold no input record (left in place).",
    ),
    # -- both engines, each its own way ----------------------------------------------------------
    _engines(
        "reselect_queries",
        "Queries on source tables for --reselect (one per table a batch, or batch partition).",
    ),
    _engines(
        "reselect_failures", "--reselect queries that failed or timed out (columns unresolved)."
    ),
    _engines(
        "reselect_skipped", "--reselect queries not made: over --reselect-max-qps, or resting."
    ),
    # -- the Spark engine ------------------------------------------------------------------------
    _spark("state_unreadable", "Keys whose Spark state could not be decoded (started afresh)."),
    _spark(
        "bootstrapped_keys", "Keys whose state a bootstrap record set (hydrator state bootstrap)."
    ),
    _spark("rows_unreadable", "Routed rows that did not unpack (a bug, not bad input)."),
)

COUNTER_NAMES: tuple[str, ...] = tuple(spec.name for spec in COUNTERS)
CORE_COUNTERS: tuple[str, ...] = tuple(s.name for s in COUNTERS if s.source == "core")


def counters_of(engine: Literal["embedded", "spark"]) -> tuple[CounterSpec, ...]:
    """The counters a run of `engine` keeps: the core's and its own."""
    return tuple(spec for spec in COUNTERS if spec.source in ("core", "engines", engine))
