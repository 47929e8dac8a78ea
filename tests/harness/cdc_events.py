"""Hand-written Debezium-shaped (Postgres, bare JSON) events for one table, with the full rows a
hydrator must reproduce.

`ToastTable` plays a table with a TOASTed column `doc`: updates that do not touch `doc` ship the
placeholder, as Debezium does under the default replica identity. Every event remembers the
full `after` row it stands for, keyed by its position (`source.lsn`), so a test can check each
hydrated output against it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from hydrator.kafka.partitioner import partition_for_key

PLACEHOLDER = "__debezium_unavailable_value"
OLD_KEY_HEADER = "__debezium.oldkey"
NEW_KEY_HEADER = "__debezium.newkey"

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def key_bytes(key: int) -> bytes:
    return orjson.dumps({"id": key})


def envelope(op: str, before: Any, after: Any, lsn: int, table: str) -> bytes:
    return orjson.dumps(
        {
            "before": before,
            "after": after,
            "source": {"connector": "postgresql", "table": table, "lsn": lsn},
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        }
    )


@dataclass
class ToastTable:
    name: str = "items"
    doc_size: int = 3000
    seed: int = 7
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    # lsn -> the full `after` row the event stands for (None for deletes)
    expected_after: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    lsn: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _next_lsn(self) -> int:
        self.lsn += 1
        return self.lsn

    def _doc(self) -> str:
        return "".join(self._rng.choices("abcdefghij", k=self.doc_size))

    def insert(self, key: int) -> Record:
        row = {"id": key, "doc": self._doc(), "n": 0}
        self.rows[key] = row
        lsn = self._next_lsn()
        self.expected_after[lsn] = dict(row)
        return key_bytes(key), envelope("c", None, row, lsn, self.name), []

    def update(self, key: int, touch_doc: bool = False) -> Record:
        row = dict(self.rows[key])
        row["n"] += 1
        if touch_doc:
            row["doc"] = self._doc()
        self.rows[key] = row
        lsn = self._next_lsn()
        self.expected_after[lsn] = dict(row)
        shipped = row if touch_doc else {**row, "doc": PLACEHOLDER}
        return key_bytes(key), envelope("u", None, shipped, lsn, self.name), []

    def delete(self, key: int) -> Record:
        self.rows.pop(key)
        lsn = self._next_lsn()
        self.expected_after[lsn] = None
        return (
            key_bytes(key),
            envelope("d", {"id": key, "doc": None, "n": None}, None, lsn, self.name),
            [],
        )

    def change_key(self, old: int, new: int) -> list[Record]:
        """UPDATE ... SET id = new: DELETE(old) + tombstone carrying the new key, then
        CREATE(new) with the old key and the unchanged TOAST column as a placeholder."""
        row = self.rows.pop(old)
        new_row = {**row, "id": new}
        self.rows[new] = new_row
        delete_lsn, create_lsn = self._next_lsn(), self._next_lsn()
        self.expected_after[delete_lsn] = None
        self.expected_after[create_lsn] = dict(new_row)
        to_new = [(NEW_KEY_HEADER, key_bytes(new))]
        to_old = [(OLD_KEY_HEADER, key_bytes(old))]
        before = {"id": old, "doc": None, "n": None}
        return [
            (key_bytes(old), envelope("d", before, None, delete_lsn, self.name), to_new),
            (key_bytes(old), None, to_new),
            (
                key_bytes(new),
                envelope("c", None, {**new_row, "doc": PLACEHOLDER}, create_lsn, self.name),
                to_old,
            ),
        ]

    def key_change_chain(self, length: int, partitions: int) -> tuple[list[int], list[Record]]:
        """A row inserted, then its key changed `length` - 1 times, each time to a key that
        Kafka's default partitioner puts in another of `partitions` partitions than the last:
        (the keys in order, the records)."""
        chain = [1]
        while len(chain) < length:
            previous = partition_for_key(key_bytes(chain[-1]), partitions)
            chain.append(
                next(
                    k
                    for k in itertools.count(chain[-1] + 1)
                    if partition_for_key(key_bytes(k), partitions) != previous
                )
            )
        records = [self.insert(chain[0])]
        for old, new in itertools.pairwise(chain):
            records += self.change_key(old, new)
        return chain, records

    def workload(self, keys: int, updates_per_key: int) -> Iterator[Record]:
        """Inserts, then rounds of updates (every fifth one rewrites the TOASTed column)."""
        for key in range(keys):
            yield self.insert(key)
        for round_ in range(updates_per_key):
            for key in range(keys):
                yield self.update(key, touch_doc=(round_ + key) % 5 == 0)


def after_of(value: bytes) -> tuple[int, dict[str, Any] | None]:
    """(lsn, after) of a hydrated Debezium value."""
    document = orjson.loads(value)
    return document["source"]["lsn"], document["after"]
