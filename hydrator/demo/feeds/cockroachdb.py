"""A generated CockroachDB changefeed (`format=json`, `envelope=wrapped`, `WITH updated,
resolved`) of an `orders` table, as CockroachDB's Kafka sink delivers it.

* A row message's key is the JSON array of the primary key (`[7]`), its value
  `{"after": {...}, "updated": "<wall>.<logical>"}`, `{"after": null, ...}` for a delete; the
  sink places it by FNV-1a of the key bytes. `{"resolved": "..."}` goes to every partition with
  a null key.
* Delivery is at least once: now and then a message comes again right away, or an older
  version of a row arrives after newer ones. Those copies are stale: the hydrator drops them.
* JSON is written as CockroachDB writes it (`{"a": 1, "b": "x"}`), DECIMAL columns as numbers
  with their digits (`12.30`).

The enriched message is the input plus `before`: the row as it was, `null` when there was none.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from hydrator.demo.feeds import FeedRecord, Showcase
from hydrator.demo.show import Pair
from hydrator.kafka.partitioner import changefeed_partition

WALL_START = 1_700_000_000_000_000_000  # nanoseconds, CockroachDB's HLC wall time
STATUSES = ("new", "paid", "packed", "shipped", "delivered")
CUSTOMERS = ("Ada", "Grace", "Edsger", "Barbara", "Ken", "Radia")

Row = dict[str, str]  # column -> its JSON text, as CockroachDB spells it


class CockroachFeed:
    name = "cockroachdb"
    label = "CockroachDB"
    topic = "demo.cockroachdb.orders"
    origin = "a CockroachDB changefeed on `orders` (format=json, WITH updated, resolved)"
    takes_schemas = False

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def records(self, events: int, partitions: int) -> list[FeedRecord]:
        rng = self.rng
        keys = max(10, events // 25)
        rows: dict[int, Row | None] = {}
        sent: dict[int, list[FeedRecord]] = {}  # each row's versions, first deliveries
        out: list[FeedRecord] = []
        wall, logical = WALL_START, 0
        while len(out) < events:
            roll = rng.random()
            if roll < 0.03:
                resolved = _object({"resolved": json.dumps(f"{wall}.{logical:010d}")}).encode()
                out += [
                    FeedRecord(None, resolved, p, resolved, "resolved") for p in range(partitions)
                ]
                continue
            if roll < 0.12 and sent:
                versions = sent[rng.choice(sorted(sent))]
                again = versions[-1] if rng.random() < 0.5 else rng.choice(versions)
                out.append(FeedRecord(again.key, again.value, again.partition, None, "duplicate"))
                continue
            if rng.random() < 0.3:
                logical += 1  # another change within the same wall time
            else:
                wall, logical = wall + rng.randint(1, 10**9), 0
            order = rng.randint(1, keys)
            previous = rows.get(order)
            if previous is None:
                row, kind = self._new_order(order), "insert"
            elif rng.random() < 0.15:
                row, kind = None, "delete"
            else:
                row, kind = self._change(previous), "update"
            rows[order] = row
            members = {"after": _row(row), "updated": json.dumps(f"{wall}.{logical:010d}")}
            value = _object(members)
            expected = _object({**members, "before": _row(previous)})
            key = f"[{order}]".encode()
            record = FeedRecord(
                key,
                value.encode(),
                changefeed_partition(key, partitions),
                expected.encode(),
                kind,
            )
            sent.setdefault(order, []).append(record)
            out.append(record)
        return out

    def pick(self, pairs: Sequence[Pair]) -> list[Showcase]:
        shown = []
        updates = [p for p in pairs if _kind(p) == "update"]
        if updates:
            shown.append(
                Showcase(
                    "An UPDATE: CockroachDB ships the row as it is now",
                    max(updates, key=_changed_columns),
                    "The message has `after` and its HLC timestamp `updated`, nothing of what "
                    "changed. The hydrator keeps each key's last row and adds it as `before`.",
                )
            )
        deletes = [p for p in pairs if _kind(p) == "delete"]
        if deletes:
            shown.append(
                Showcase(
                    "A DELETE: `after` is null, and so is everything the row held",
                    deletes[0],
                    "The enriched message says which row went away: `before` is the deleted row.",
                )
            )
        return shown

    def _new_order(self, order: int) -> Row:
        rng = self.rng
        return {
            "id": str(order),
            "customer": json.dumps(rng.choice(CUSTOMERS)),
            "status": json.dumps(STATUSES[0]),
            "total": f"{rng.randint(100, 99999) / 100:.2f}",  # DECIMAL(10,2): 12.30 as written
            "items": str(rng.randint(1, 9)),
        }

    def _change(self, row: Row) -> Row:
        rng = self.rng
        status = STATUSES.index(json.loads(row["status"]))
        if status + 1 < len(STATUSES) and rng.random() < 0.7:
            return {**row, "status": json.dumps(STATUSES[status + 1])}
        items = rng.randint(1, 9)
        return {**row, "items": str(items), "total": f"{items * rng.randint(100, 9999) / 100:.2f}"}


def _kind(pair: Pair) -> str:
    document = json.loads(pair.raw.value or b"null")
    if not isinstance(document, dict) or "after" not in document:
        return "other"
    before = json.loads(pair.enriched.value or b"null").get("before")
    if document["after"] is None:
        return "delete" if before is not None else "other"
    return "update" if before is not None else "insert"


def _changed_columns(pair: Pair) -> int:
    enriched = json.loads(pair.enriched.value or b"{}")
    after, before = enriched.get("after") or {}, enriched.get("before") or {}
    return sum(after.get(column) != value for column, value in before.items())


def _row(row: Row | None) -> str:
    return "null" if row is None else _object(row)


def _object(members: dict[str, str]) -> str:
    """An object as CockroachDB's JSON encoder writes it: `{"a": 1, "b": "x"}`."""
    return "{" + ", ".join(f"{json.dumps(name)}: {text}" for name, text in members.items()) + "}"
