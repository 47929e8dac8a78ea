"""The bench's workload and its output check (bench/workload.py): the bare core hydrates it to
the truth, and a runner that leaves placeholders, loses events or repeats them is named."""

from __future__ import annotations

import orjson

from bench.core import core_result, timed_passes
from bench.peer_rule import hydrate
from bench.workload import PLACEHOLDER, Checker, Workload, WorkloadShape

SMALL = WorkloadShape(events=600, keys=50, row_bytes=300, toast_bytes=500, placeholder_ratio=0.5)


def test_the_core_hydrates_the_workload_to_its_truth() -> None:
    result = core_result(Workload(SMALL))
    assert result.output_check == "ok"
    assert result.output_records == SMALL.events


def test_the_peer_rule_hydrates_the_workload_to_its_truth() -> None:
    # `python -m bench core --floor`: a pass whose outputs do not all check raises SystemExit
    (one,) = timed_passes(SMALL, 1, floor=True)
    assert one.events == SMALL.events


def test_the_peer_rule_fills_from_the_stored_row_and_drops_a_stale_event() -> None:
    def event(lsn: int, doc: str) -> bytes:
        after = {"id": 1, "doc": doc}
        return orjson.dumps({"before": None, "after": after, "source": {"lsn": lsn}})

    first, stored = hydrate(event(2, "text"), None)
    assert first is not None and stored == {"lsn": 2, "row": {"id": 1, "doc": "text"}}
    filled, _ = hydrate(event(3, PLACEHOLDER), stored)
    assert filled is not None
    assert orjson.loads(filled)["after"] == {"id": 1, "doc": "text"}
    assert orjson.loads(filled)["before"] == {"id": 1, "doc": "text"}
    assert hydrate(event(2, PLACEHOLDER), stored) == (None, None)


def test_the_workload_has_its_shape() -> None:
    workload = Workload(SMALL)
    events = list(workload.events())
    assert len(events) == SMALL.events
    assert {key for key, _, _ in events[: SMALL.keys]} == set(range(SMALL.keys))
    updates = SMALL.events - SMALL.keys
    assert 0.3 * updates < workload.truth.placeholders < 0.7 * updates
    row = orjson.loads(events[0][2])["after"]
    assert abs(len(orjson.dumps({**row, "doc": ""})) - SMALL.row_bytes) < 60
    assert len(row["doc"]) == SMALL.toast_bytes


def test_a_copy_is_flagged_and_a_count_only_check_is_not() -> None:
    workload = Workload(SMALL)
    values = [value for _, _, value in workload.events()]
    hydrating = Checker(workload)
    counting = Checker(workload, hydrates=False)
    for value in values:
        hydrating.check(value)
        counting.check(value)
    verdict = hydrating.finish()
    assert verdict.placeholders_left == workload.truth.placeholders
    assert verdict.summary().startswith("WRONG: ")
    assert PLACEHOLDER not in verdict.summary()
    assert counting.finish().summary() == "ok"


def test_missing_and_repeated_outputs_are_counted() -> None:
    workload = Workload(SMALL)
    values = [value for _, _, value in workload.events()]
    checker = Checker(workload, hydrates=False)
    for value in [*values[:-3], values[0], b"not json"]:
        checker.check(value)
    verdict = checker.finish()
    assert (verdict.missing, verdict.duplicates, verdict.unreadable) == (3, 1, 1)
    assert verdict.summary() == "WRONG: 3 missing, 1 unreadable, 1 repeated"
