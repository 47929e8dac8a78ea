"""The oracle through the core (docs/testing.md): hydrating the default-identity twin's real
Debezium events must reproduce the REPLICA IDENTITY FULL twin's `after` and `before`, event by
event per key.

One Debezium run per binary.handling.mode, serialized with schemas.enable true and false; the
raw topics are read back with a plain consumer loop and fed to `Hydrator` in two orders:
partition after partition (a key change's CREATE often arrives long before its DELETE, so it must
park) and partitions round-robin.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from hydrator.core.records import HEADER_SOURCE, HEADER_UNRESOLVED
from tests.harness import oracle
from tests.harness.kafka import Broker
from tests.harness.oracle import Captured, TwinCapture
from tests.harness.postgres import PgDatabase
from tests.support.core import debezium_hydrator

pytestmark = pytest.mark.integration

OPERATIONS = 150


# binary.handling.mode is connector-wide: one Debezium run each; both envelopes come from it
BINARY_MODES: dict[oracle.BinaryHandlingMode, int] = {"bytes": 1, "hex": 2}  # mode -> seed

ORDERS: dict[str, Callable[[Sequence[Captured]], list[Captured]]] = {
    "partition-major": lambda records: sorted(records, key=lambda r: (r.partition, r.offset)),
    "interleaved": oracle.interleaved,
}


@dataclass(frozen=True)
class Captures:
    binary_mode: oracle.BinaryHandlingMode
    schemas_enable: bool
    capture: TwinCapture


@pytest.fixture(scope="module", params=list(BINARY_MODES))
def runs(
    request: pytest.FixtureRequest,
    debezium_jvm: None,
    kafka_broker: Broker,
    postgres_module: PgDatabase,
) -> tuple[oracle.BinaryHandlingMode, dict[bool, TwinCapture]]:
    mode: oracle.BinaryHandlingMode = request.param
    workload = oracle.generate_workload(seed=BINARY_MODES[mode], operations=OPERATIONS)
    base = f"oracle_{mode}_{uuid.uuid4().hex[:6]}"
    return mode, oracle.capture_twins_envelopes(
        postgres_module,
        kafka_broker.bootstrap_servers,
        workload,
        base,
        envelopes=(True, False),
        binary_handling_mode=mode,
    )


@pytest.fixture(params=[True, False], ids=["schemas_true", "schemas_false"])
def captured(
    request: pytest.FixtureRequest, runs: tuple[oracle.BinaryHandlingMode, dict[bool, TwinCapture]]
) -> Captures:
    mode, captures = runs
    return Captures(mode, request.param, captures[request.param])


def test_the_oracle_has_teeth(captured: Captures) -> None:
    """Without hydration the twins differ (placeholders, null/key-only before); the FULL twin has
    no placeholder; comparing the FULL twin with itself finds nothing. Needs no core."""
    cap = captured.capture
    workload = cap.workload
    for kind in ("insert", "update", "delete", "reinsert", "pk_change"):
        assert workload.count(kind) > 0, kind

    shapes = oracle.placeholder_shapes(captured.binary_mode)
    raw = [oracle.payload(r.value) for r in cap.default if r.value is not None]
    with_placeholders = [v for v in raw if oracle.placeholder_columns(v["after"], shapes)]
    kinds = {c for v in raw for c in oracle.placeholder_columns(v["after"], shapes)}
    assert len(with_placeholders) > len(raw) // 4
    assert kinds == set(oracle.TOAST_COLUMNS)
    for r in cap.full:
        value = oracle.payload(r.value)
        if value is not None:
            assert not oracle.placeholder_columns(value["after"], shapes), r
            assert not oracle.placeholder_columns(value["before"], shapes), r

    full = oracle.events_by_key(oracle.captured_triples(cap.full))
    default = oracle.events_by_key(oracle.captured_triples(cap.default))
    assert oracle.compare(full, full) == []
    unhydrated = oracle.compare(default, full)
    assert {m.field.split(".")[0] for m in unhydrated} == {"after", "before"}
    assert not [m for m in unhydrated if m.field in ("count", "op")]


@pytest.mark.parametrize("order", list(ORDERS))
def test_hydrated_default_identity_matches_full_twin(captured: Captures, order: str) -> None:
    cap = captured.capture
    run = oracle.hydrate_with_core(debezium_hydrator(), ORDERS[order](cap.default))

    assert run.dead == []
    assert len(run.emitted) == len(cap.default)
    # docs/rules.md, rule 7: same key bytes, same partition as the raw record it came from
    by_source = {f"{r.topic}:{r.partition}:{r.offset}": r for r in cap.default}
    for out in run.emitted:
        source = by_source[dict(out.headers)[HEADER_SOURCE].decode()]
        assert (out.partition, out.key) == (source.partition, source.key)
    unresolved = [o for o in run.emitted if any(k == HEADER_UNRESOLVED for k, _ in o.headers)]
    assert unresolved == []
    hydrated = oracle.events_by_key(run.triples())
    full = oracle.events_by_key(oracle.captured_triples(cap.full))
    mismatches = oracle.compare(hydrated, full)
    assert not mismatches, f"{len(mismatches)} mismatches:\n{oracle.report(mismatches)}"


@pytest.mark.parametrize("order", list(ORDERS))
def test_changed_header_is_the_full_twins_difference(captured: Captures, order: str) -> None:
    """`hydrator.changed` on every output equals the set difference of the REPLICA IDENTITY
    FULL twin's `before` and `after` for the same event, though the input shipped placeholders
    and null or key-only `before`s."""
    cap = captured.capture
    run = oracle.hydrate_with_core(debezium_hydrator(), ORDERS[order](cap.default))
    mismatches, compared = oracle.changed_mismatches(run.emitted, cap.full)
    assert not mismatches, f"{len(mismatches)} mismatches:\n{oracle.report(mismatches)}"
    assert compared == sum(1 for r in cap.full if r.value is not None)
