"""Checks of an output topic against the generated demo stream it was hydrated from: every input
came out (by `hydrator.source`), nothing foreign did, and each output equals the row's truth."""

from __future__ import annotations

from collections import defaultdict

from hydrator.core.records import HEADER_SOURCE
from hydrator.demo.stream import ChangeRecord
from hydrator.demo.truth import COMPARED, payload
from tests.harness.topics import Consumed


def copies_by_source(
    outputs: list[Consumed], records: list[ChangeRecord], placed: list[tuple[int, int]], source: str
) -> tuple[dict[str, ChangeRecord], dict[str, list[Consumed]]]:
    """(input record per `topic:partition:offset`, its outputs in read order); asserts that no
    input is missing and no output names an input that was not produced."""
    truth = {f"{source}:{p}:{o}": r for r, (p, o) in zip(records, placed, strict=True)}
    copies: dict[str, list[Consumed]] = defaultdict(list)
    for out in outputs:
        copies[out.header(HEADER_SOURCE).decode()].append(out)
    missing = sorted(set(truth) - set(copies))
    assert not missing, f"lost {len(missing)} records: {missing[:5]}"
    assert set(copies) <= set(truth)
    return truth, copies


def check_hydrated(src: str, out: Consumed, record: ChangeRecord) -> None:
    """The output of `record` carries the row's true values (a tombstone stays one)."""
    got = payload(out.value)
    if record.truth is None:
        assert got is None, f"{src}: a tombstone must pass through"
        return
    assert got is not None, src
    for name in COMPARED:
        assert got[name] == record.truth[name], f"{src} ({record.kind}): {name} wrongly hydrated"


def check_key_order(copies: dict[str, list[Consumed]]) -> None:
    """Each key's outputs (first copies) come in the order of their input records."""
    by_key: dict[tuple[int, bytes | None], list[tuple[int, int]]] = defaultdict(list)
    for src, outs in copies.items():
        first = outs[0]
        by_key[(first.partition, first.key)].append((first.offset, int(src.rsplit(":", 1)[1])))
    for key, pairs in by_key.items():
        in_output_order = [offset for _, offset in sorted(pairs)]
        assert in_output_order == sorted(in_output_order), f"{key} out of order"
