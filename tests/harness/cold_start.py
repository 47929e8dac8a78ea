"""What the cold-start tests of both engines share (docs/cold-start.md): a workload whose keys'
first events in the stream are primary-key changes, the pairing of each output with the
REPLICA IDENTITY FULL twin's event at the same place, and the check that no output passes a
value off as the row's: an output without `hydrator.stale`/`hydrator.unresolved` (nor
`hydrator.reselected.current`, values read from the source that say they may be newer) equals
the twin's row at that event, and a marked one equals it outside the columns it lists."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.harness import oracle
from tests.harness.reselect import PARTITIONS, headers_of, source_of

ROWS = 14


def key_change_workload(seed: int = 41) -> oracle.Workload:
    """ROWS rows inserted with every TOAST column big (the inserts will be gone from the topic),
    then keys whose first event is a key change: plain, with a column changed, followed by
    updates, chained (1 -> 104 -> 204), in one transaction with an update of the new key, with the
    TOAST value rewritten later, after an update of the old key, re-keyed then deleted, and onto
    a key that an earlier key change freed (14 -> 1); two rows only updated."""
    rng = random.Random(seed)
    inserts = [
        [oracle.insert_statement("insert", key, oracle.big_row(rng))] for key in range(1, ROWS + 1)
    ]

    def small(key: int) -> oracle.Statement:
        return oracle.update_statement(key, {"small": rng.randrange(1_000_000)})

    def rekey(key: int, new: int, **changes: Any) -> oracle.Statement:
        return oracle.update_statement(key, changes, new_key=new)

    txs: list[list[oracle.Statement]] = [
        [rekey(1, 101)],
        [rekey(2, 102, small=5)],
        [rekey(3, 103)],
        [small(103)],
        [rekey(4, 104)],
        [rekey(104, 204)],
        [small(204)],
        [rekey(5, 105), small(105)],  # one transaction: the row read was written after the CREATE
        [rekey(6, 106)],
        [oracle.update_statement(106, {"body": oracle._text(rng, 4000)})],
        [small(7)],
        [rekey(7, 107)],
        [rekey(8, 108, label="gone")],
        [oracle.delete_statement(108)],
        [small(9)],
        [small(10)],
        [rekey(11, 111)],
        [rekey(12, 112)],
        [small(101)],
        [small(102)],
        [small(107)],
        [oracle.update_statement(111, {"label": "later"})],
        [rekey(13, 113, label="moved")],
        [rekey(14, 1)],  # onto the key the first change left
        [small(1)],
    ]
    return oracle.Workload([*inserts, *txs])


@dataclass
class Paired:
    """An output with the default-identity record it came from and the FULL twin's event at
    the same place in its key's sequence (payloads)."""

    out: oracle.Captured
    raw: dict[str, Any]
    full: dict[str, Any]
    source: str  # the default record's topic:partition:offset in the capture


def paired_outputs(
    capture: oracle.TwinCapture,
    topic: str,
    records: list[oracle.Captured],
    outputs: list[oracle.Captured],
) -> list[Paired]:
    """Each output of `records` (the capture's records re-produced in `topic`, partitions and
    order kept) with its input and its twin. Kafka tombstones are left out."""
    original = {(r.partition, r.key, r.value): source_of(r) for r in capture.default}
    late_to_original = {
        f"{topic}:{r.partition}:{i}": original[(r.partition, r.key, r.value)]
        for p in range(PARTITIONS)
        for i, r in enumerate(x for x in records if x.partition == p)
    }
    default = defaultdict(list)
    for r in capture.default:
        if r.value is not None:
            default[oracle.canonical_key(r.key)].append(r)
    full = defaultdict(list)
    for r in capture.full:
        if r.value is not None:
            full[oracle.canonical_key(r.key)].append(oracle.payload(r.value))
    twin: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for key, raws in default.items():
        assert len(raws) == len(full[key]), key
        for raw, twin_payload in zip(raws, full[key], strict=True):
            twin[source_of(raw)] = (oracle.payload(raw.value), twin_payload)
    paired = []
    for out in outputs:
        if out.value is None:
            continue
        where = out.header("hydrator.source")
        assert where is not None
        source = late_to_original[where.decode()]
        raw, twin_payload = twin[source]
        paired.append(Paired(out, raw, twin_payload, source))
    return paired


def marked(out: oracle.Captured) -> bool:
    """The output says some value in it may not be the row's at its event: unresolved columns,
    an event older than a bootstrap, or values re-selected that may be newer."""
    return any(
        out.header(name) is not None
        for name in ("hydrator.unresolved", "hydrator.stale", "hydrator.reselected.current")
    )


def listed(out: oracle.Captured) -> set[str]:
    """The columns an output says it may not hold the row's value of at its event."""
    return {
        *headers_of(out, "hydrator.unresolved"),
        *headers_of(out, "hydrator.reselected.current"),
    }


def outside(image: dict[str, Any] | None, columns: set[str]) -> dict[str, Any] | None:
    return None if image is None else {c: v for c, v in image.items() if c not in columns}


@dataclass
class Honesty:
    unmarked: int = 0
    marked: int = 0
    problems: list[str] = field(default_factory=list)


def check_honest(paired: list[Paired]) -> Honesty:
    """An unmarked output is the twin's row at that event: same op, same `after`, and a
    `before` that is the twin's (a null `before` claims nothing: the stream ships an update's
    so when it does not know it). A marked one is the twin's outside the columns it lists."""
    seen = Honesty()
    for p in paired:
        got = oracle.payload(p.out.value)
        columns = listed(p.out)
        if marked(p.out):
            seen.marked += 1
        else:
            seen.unmarked += 1
            if got["op"] != p.full["op"]:
                seen.problems.append(f"{p.source}: op {got['op']} vs {p.full['op']}")
        for name in ("after", "before"):
            if name == "before" and got["before"] is None:
                continue
            mine, theirs = outside(got[name], columns), outside(p.full[name], columns)
            if mine != theirs:
                differing = sorted(
                    c
                    for c in set(mine or {}) | set(theirs or {})
                    if (mine or {}).get(c, "<absent>") != (theirs or {}).get(c, "<absent>")
                )
                state = "unmarked" if not marked(p.out) else f"listing {sorted(columns)}"
                seen.problems.append(
                    f"{p.source} op {got['op']} key {oracle.canonical_key(p.out.key)} "
                    f"({state}): {name} differs from the twin's in {differing}"
                )
    return seen


def keys_alive_at_end(capture: oracle.TwinCapture) -> set[str]:
    """The keys whose row exists when the workload is done (a re-select can read them)."""
    last: dict[str, str] = {}
    for r in capture.full:
        if r.value is not None:
            last[oracle.canonical_key(r.key)] = oracle.payload(r.value)["op"]
    return {key for key, op in last.items() if op != "d"}
