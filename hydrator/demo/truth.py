"""What each hydrated record must be, and whether it is.

The truth of a raw record is the event the REPLICA IDENTITY FULL twin carries for it:
`{"op", "before", "after"}` (None for a Kafka tombstone), keyed by the raw record's
`topic:partition:offset`, which the hydrator copies into `hydrator.source`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from hydrator.core.records import HEADER_SOURCE
from hydrator.events import RawRecord
from hydrator.formats.keys import canonical_key

Truth = Mapping[str, dict[str, Any] | None]
COMPARED = ("op", "before", "after")


def payload(value: bytes | None) -> dict[str, Any] | None:
    """A Debezium value without its `{"schema", "payload"}` wrapper; None for a tombstone."""
    if value is None:
        return None
    document = orjson.loads(value)
    if isinstance(document, dict) and document.keys() == {"schema", "payload"}:
        return document["payload"]
    return document


class Documents(Protocol):
    """How the demo reads a topic's records: a value as its JSON document, a key canonically."""

    def value(self, data: bytes | None) -> dict[str, Any] | None: ...

    def key(self, data: bytes) -> str: ...


class JsonDocuments:
    """Kafka Connect's JsonConverter records (bare or in the schema envelope)."""

    def value(self, data: bytes | None) -> dict[str, Any] | None:
        return payload(data)

    def key(self, data: bytes) -> str:
        return canonical_key(data)


JSON = JsonDocuments()


def truth_from_twin(
    raw: Sequence[RawRecord], twin: Sequence[RawRecord], documents: Documents = JSON
) -> dict[str, Any]:
    """Pair each raw record with the twin's record of the same key and rank (every statement ran
    on both tables, so each key has the same history in both)."""
    twins: dict[str, list[RawRecord]] = defaultdict(list)
    for record in sorted(twin, key=lambda r: (r.partition, r.offset)):
        twins[_row_key(record, documents)].append(record)
    rank: dict[str, int] = defaultdict(int)
    truth: dict[str, Any] = {}
    for record in sorted(raw, key=lambda r: (r.partition, r.offset)):
        key = _row_key(record, documents)
        events = twins.get(key, [])
        if rank[key] < len(events):
            full = documents.value(events[rank[key]].value)
            truth[record.source] = None if full is None else {f: full.get(f) for f in COMPARED}
        rank[key] += 1
    return truth


def _row_key(record: RawRecord, documents: Documents) -> str:
    # every record of a Debezium table topic, tombstones too, is keyed by the row's primary key
    assert record.key is not None
    return documents.key(record.key)


def mismatches(
    enriched: Sequence[RawRecord], truth: Truth, documents: Documents = JSON
) -> list[str]:
    """Every difference between the hydrated records and their truth, plus raw records that
    produced no output (they must all come out: none is expected to be dropped here)."""
    problems: list[str] = []
    seen: set[str] = set()
    for record in enriched:
        raw_source = record.header(HEADER_SOURCE)
        source = raw_source.decode() if raw_source else "?"
        seen.add(source)
        if source not in truth:
            problems.append(f"{source}: no truth for this record")
            continue
        want, got = truth[source], documents.value(record.value)
        if want is None or got is None:
            if want is not got:
                problems.append(f"{source}: tombstone on one side only")
            continue
        for name in COMPARED:
            if got.get(name) != want.get(name):
                problems.append(f"{source}: {name} differs from the full row")
    missing = sorted(set(truth) - seen)
    problems += [f"{source}: no enriched record" for source in missing]
    return problems
