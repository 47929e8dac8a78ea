"""A generated Debezium Cassandra connector stream (JSON, schemas off) of an
`inventory.customers` table in a three-replica cluster.

* A value is `{"ts_ms", "op", "source", "after"}`, no `before`; `after` names every column
  plus `_range_start`/`_range_end`. A cell the mutation wrote is
  `{"value": v, "deletion_ts": null, "set": true}`; a column it did not write is `null`. A
  DELETE writes every regular cell as `{"value": null, "deletion_ts": T, "set": true}`.
* The write time of a mutation is `source.ts_us`. Each replica's node runs a connector, so an
  event can arrive again from another replica, later, after newer writes of the same row.
* The key is `{"id": n}`, placed as Kafka Connect's producer places it (murmur2).

The enriched event has each `null` column of an insert or update filled from the latest write
of that column that arrived before it: `{"value": v, "deletion_ts": null, "set": false}`
(value null when that write deleted the cell). Cells the event wrote stay as written.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydrator.demo.feeds import FeedRecord, Showcase
from hydrator.demo.show import Pair

REGULAR_COLUMNS = ("name", "email", "city", "score", "note")
RANGE_COLUMNS = ("_range_start", "_range_end")
TIME_START_US = 1_700_000_000_000_000
CITIES = ("Oslo", "Lagos", "Lima", "Pune", "Kyiv", "Perth")
REPLICAS = 3

Cell = dict[str, Any]


@dataclass(frozen=True)
class _Mutation:
    op: str
    id: int
    time: int  # write time, microseconds
    cells: dict[str, Cell]  # the regular columns it wrote


class CassandraFeed:
    name = "cassandra"
    label = "Cassandra"
    topic = "demo.cassandra.customers"
    origin = "the Debezium Cassandra connector on `inventory.customers` (3 replicas, JSON)"
    takes_schemas = False

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def records(self, events: int, partitions: int) -> list[FeedRecord]:
        rng = self.rng
        keys = max(8, events // 20)
        live: set[int] = set()
        arrived: dict[int, dict[str, tuple[int, Cell]]] = {}  # id -> column -> latest write
        late: list[tuple[int, _Mutation]] = []  # (due index, mutation) another replica sends
        out: list[FeedRecord] = []
        time = TIME_START_US
        while len(out) < events:
            due = [item for item in late if item[0] <= len(out)]
            if due and rng.random() < 0.5:
                late.remove(due[0])
                out.append(self._deliver(due[0][1], arrived, "replica copy", rng.randint(1, 2)))
                continue
            time += rng.randint(1, 3_000_000)
            row = rng.randint(1, keys)
            if row not in live:
                mutation = _Mutation("i", row, time, self._all_cells())
                live.add(row)
            elif rng.random() < 0.1:
                mutation = _Mutation(
                    "d", row, time, {c: _cell(None, time) for c in REGULAR_COLUMNS}
                )
                live.discard(row)
            else:
                mutation = _Mutation("u", row, time, self._some_cells())
            out.append(self._deliver(mutation, arrived, _KINDS[mutation.op], 0))
            if rng.random() < 0.15:
                late.append((len(out) + rng.randint(1, 12), mutation))
        return out

    def pick(self, pairs: Sequence[Pair]) -> list[Showcase]:
        shown = []
        updates = [p for p in pairs if _op(p) == "u" and _filled(p)]
        if updates:
            shown.append(
                Showcase(
                    "An UPDATE: Cassandra ships the cells it wrote, the others are null",
                    max(updates, key=lambda p: len(_filled(p))),
                    "Cassandra writes without reading, so the connector knows only the written "
                    "cells. The hydrator fills each null column from the latest write it has "
                    'seen, marked "set": false: filled, not written.',
                )
            )
        copies = [(copy, first) for copy, first in _copies(pairs) if _op(copy) == "u"]
        if copies:
            copy, first = max(copies, key=lambda c: _differences(*c))
            shown.append(
                Showcase(
                    "The same UPDATE again, from another replica, after newer writes",
                    copy,
                    "Every replica's connector sends the event, in the order writes reached "
                    "its node. Cells are ordered by write time (source.ts_us): the copy's own "
                    "cells stay as written, its null ones get the latest values, which differ "
                    f"from what the first delivery ({first.raw.source}) was filled with.",
                )
            )
        return shown

    def _deliver(
        self,
        mutation: _Mutation,
        arrived: dict[int, dict[str, tuple[int, Cell]]],
        kind: str,
        replica: int,
    ) -> FeedRecord:
        written = {"id": _cell(mutation.id), **mutation.cells}
        after: dict[str, Any] = {
            "id": written["id"],
            **{c: mutation.cells.get(c) for c in REGULAR_COLUMNS},
            **dict.fromkeys(RANGE_COLUMNS),
        }
        latest = arrived.setdefault(mutation.id, {})
        filled = dict(after)
        if mutation.op != "d":
            for column in REGULAR_COLUMNS:
                if after[column] is None and column in latest:
                    filled[column] = {
                        "value": latest[column][1]["value"],
                        "deletion_ts": None,
                        "set": False,
                    }
        for column, cell in mutation.cells.items():
            if column not in latest or latest[column][0] < mutation.time:
                latest[column] = (mutation.time, cell)
        key = json.dumps({"id": mutation.id}, separators=(",", ":")).encode()
        return FeedRecord(
            key,
            _json(self._event(mutation, after, replica)),
            None,
            _json(self._event(mutation, filled, replica)),
            kind,
        )

    def _event(self, mutation: _Mutation, after: dict[str, Any], replica: int) -> dict[str, Any]:
        time = mutation.time
        source = {
            "version": "3.0.7.Final",
            "connector": "cassandra",
            "name": "demo",
            "ts_ms": time // 1000,
            "snapshot": "false",
            "ts_us": time,
            "cluster": "Demo Cluster",
            "file": f"CommitLog-7-17000000000{replica}.log",
            "pos": time % 1_000_003,
            "keyspace": "inventory",
            "table": "customers",
        }
        processed = time // 1000 + 40 + 900 * replica  # when that node's connector read it
        return {"ts_ms": processed, "op": mutation.op, "source": source, "after": after}

    def _all_cells(self) -> dict[str, Cell]:
        rng = self.rng
        return {
            "name": _cell(rng.choice(["Ada", "Grace", "Alan", "Edsger", "Barbara"])),
            "email": _cell(f"u{rng.getrandbits(16):04x}@ex.io"),
            "city": _cell(rng.choice(CITIES)),
            "score": _cell(rng.randint(0, 100)),
            "note": _cell(rng.choice([None, "vip", "prefers email"])),
        }

    def _some_cells(self) -> dict[str, Cell]:
        every = self._all_cells()
        chosen = self.rng.sample(REGULAR_COLUMNS, self.rng.randint(1, 2))
        return {column: every[column] for column in chosen}


_KINDS = {"i": "insert", "u": "update", "d": "delete"}


def _cell(value: Any, deletion_ts: int | None = None) -> Cell:
    return {"value": value, "deletion_ts": deletion_ts, "set": True}


def _copies(pairs: Sequence[Pair]) -> list[tuple[Pair, Pair]]:
    """(copy, first delivery) of the events that arrived again from another replica: same key,
    same write time."""
    first: dict[tuple[bytes | None, int], Pair] = {}
    copies = []
    for pair in sorted(pairs, key=lambda p: (p.raw.partition, p.raw.offset)):
        document = json.loads(pair.raw.value or b"null")
        if not isinstance(document, dict):
            continue
        mutation = (pair.raw.key, document["source"]["ts_us"])
        if mutation in first:
            copies.append((pair, first[mutation]))
        else:
            first[mutation] = pair
    return copies


def _differences(copy: Pair, first: Pair) -> tuple[int, int]:
    """How many cells the copy was filled with differently from its first delivery (those with
    a value first: a deleted cell's null tells less)."""
    now = json.loads(copy.enriched.value or b"null")["after"]
    then = json.loads(first.enriched.value or b"null")["after"]
    changed = [now[column] for column in _filled(copy) if now[column] != then.get(column)]
    return sum(cell["value"] is not None for cell in changed), len(changed)


def _op(pair: Pair) -> str | None:
    document = json.loads(pair.raw.value or b"null")
    return document.get("op") if isinstance(document, dict) else None


def _filled(pair: Pair) -> list[str]:
    after = (json.loads(pair.enriched.value or b"null") or {}).get("after") or {}
    return [c for c, cell in after.items() if isinstance(cell, dict) and cell.get("set") is False]


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
