"""A generated YDB changefeed (`FORMAT = 'JSON'`, `MODE = 'UPDATES'`, `VIRTUAL_TIMESTAMPS`) of a
`devices` table, as YDB's Kafka API delivers it.

* A record is `{"key": [user_id, device], "update": {...}, "ts": [step, txId]}`: `update` holds
  the columns an UPSERT or UPDATE wrote, `reset` those a REPLACE wrote (every other column is
  NULL then), `erase: {}` a DELETE. No record carries the row's other columns.
* The Kafka key is null; a record goes to the partition owning its key range (the first key
  column's values split into equal ranges); `{"resolved": [step, txId]}` goes to every one.

The enriched record is the input plus what `MODE = 'NEW_AND_OLD_IMAGES'` would have carried:
`oldImage` (the row before, absent when there was none) and `newImage` (the row after, absent
on `erase`). Key columns are never inside the images.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from hydrator.demo.feeds import FeedRecord, Showcase
from hydrator.demo.show import Pair

USER_IDS = 64  # first key column values 0..63, split into equal ranges per partition
DEVICES = ("phone", "laptop", "tablet")
PLANS = ("free", "plus", "pro")
STEP_START = 1_700_000_000_000  # ms
TX_START = 562_949_953_421_312

Row = dict[str, Any]
Key = tuple[int, str]


class YdbFeed:
    name = "ydb"
    label = "YDB"
    topic = "demo.ydb.devices"
    origin = "a YDB changefeed on `devices` (FORMAT = 'JSON', MODE = 'UPDATES', virtual timestamps)"
    takes_schemas = False

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def records(self, events: int, partitions: int) -> list[FeedRecord]:
        rng = self.rng
        rows: dict[Key, Row] = {}
        out: list[FeedRecord] = []
        step, tx = STEP_START, TX_START
        keys = [(u, d) for u in range(USER_IDS) for d in DEVICES]
        while len(out) < events:
            step, tx = step + rng.randint(1, 2000), tx + rng.randint(1, 50)
            if rng.random() < 0.03:
                value = _json({"resolved": [step, tx]})
                out += [FeedRecord(None, value, p, value, "resolved") for p in range(partitions)]
                continue
            key = rng.choice(keys[: max(6, events // 8)])
            old = rows.get(key)
            if old is None:
                kind, operation, columns = "insert", "update", self._new_device(key)
                new: Row | None = columns
            else:
                roll = rng.random()
                if roll < 0.12:
                    kind, operation, columns, new = "delete", "erase", {}, None
                elif roll < 0.3:
                    kind, operation = "replace", "reset"
                    columns = {"plan": rng.choice(PLANS), "visits": 0}
                    new = {**dict.fromkeys(old), **columns}
                else:
                    kind, operation, columns = "update", "update", self._change(old)
                    new = {**old, **columns}
            document: dict[str, Any] = {"key": list(key), operation: columns, "ts": [step, tx]}
            enriched = dict(document)
            if old is not None:
                enriched["oldImage"] = old
            if new is not None:
                enriched["newImage"] = new
                rows[key] = new
            else:
                rows.pop(key, None)
            partition = key[0] * partitions // USER_IDS
            out.append(FeedRecord(None, _json(document), partition, _json(enriched), kind))
        return out

    def pick(self, pairs: Sequence[Pair]) -> list[Showcase]:
        by_kind: dict[str, list[Pair]] = {}
        for pair in pairs:
            by_kind.setdefault(_kind(pair), []).append(pair)
        shown = []
        if updates := by_kind.get("update"):
            shown.append(
                Showcase(
                    "An UPDATE: YDB ships the columns the statement wrote, nothing else",
                    min(updates, key=lambda p: len(_document(p.raw)["update"])),
                    "In MODE = 'UPDATES' the record names the written columns only. The "
                    "hydrator adds the images NEW_AND_OLD_IMAGES would carry: `newImage`, the "
                    "whole row after it, and `oldImage`, the row before.",
                )
            )
        if replaces := by_kind.get("reset"):
            shown.append(
                Showcase(
                    "A REPLACE: every column it does not name is now NULL",
                    replaces[0],
                    "`reset` names what REPLACE wrote; `newImage` shows the columns it set to "
                    "NULL, which the record itself does not mention.",
                )
            )
        if erases := by_kind.get("erase"):
            shown.append(
                Showcase(
                    "A DELETE: `erase` is empty",
                    erases[0],
                    "`oldImage` holds the row that was deleted.",
                )
            )
        return shown

    def _new_device(self, key: Key) -> Row:
        rng = self.rng
        return {
            "name": f"user{key[0]}'s {key[1]}",
            "plan": rng.choice(PLANS),
            "visits": rng.randint(0, 20),
            "last_seen": f"2024-05-{rng.randint(1, 28):02d}",
            "push_token": rng.choice([None, f"tok-{rng.getrandbits(48):012x}"]),
        }

    def _change(self, row: Row) -> Row:
        rng = self.rng
        if rng.random() < 0.6:
            return {"visits": (row.get("visits") or 0) + 1}
        return {"last_seen": f"2024-06-{rng.randint(1, 28):02d}", "plan": rng.choice(PLANS)}


def _kind(pair: Pair) -> str:
    document = _document(pair.raw)
    if not isinstance(document, dict):
        return "other"
    if "update" in document and "oldImage" in _document(pair.enriched):
        return "update"
    if "reset" in document:
        return "reset"
    return "erase" if "erase" in document else "other"


def _document(record: Any) -> Any:
    return json.loads(record.value or b"null")


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
