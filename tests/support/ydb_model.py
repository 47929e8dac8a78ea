"""A model of a YDB row table and its changefeed (docs/formats.md, YDB), written from YDB's
documentation and its changefeed serializer, without the codec.

Statements (UPSERT, UPDATE, REPLACE, DELETE) change the model's rows; each change is rendered
as the changefeed writes it in the chosen MODE, and with the images `NEW_AND_OLD_IMAGES` would
carry for it: the truth hydration must reach. What the source really does to a consumer is
modelled too:

* the Kafka key is null; records go to the partition owning the key range of the first key
  column, each key's records in commit order;
* consecutive changes of a row can carry the same virtual timestamp (YDB issue #9901), so
  the same statement run twice gives two identical records, both real changes;
* an initial table scan writes every row that existed before the changefeed as an `update`
  with all its columns, stamped with the snapshot's (older) timestamp; a row changed before the
  scan reached it gets its scanned value first, then the change;
* `resolved` barriers go to every partition.

Values are spelled as YDB's JSON writer spells them: Uint64 as a JSON number up to 2**64 - 1,
Decimal as a string with every digit, String as base64, Json columns as nested JSON.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass, field
from typing import Any

from hydrator import exact
from hydrator.events import RawRecord

TOPIC = "ydb.shop.orders.feed"
VALUE_COLUMNS = ("name", "amount", "balance", "meta", "blob", "flag")
ID_SPACE = 64  # first key column (Uint64) values 0..63, split into equal ranges per partition
MODES = ("UPDATES", "NEW_IMAGE", "NEW_AND_OLD_IMAGES")

Key = tuple[int, str]
Row = dict[str, Any]


@dataclass
class Rendered:
    """One changefeed record and the images `NEW_AND_OLD_IMAGES` carries for it (`barrier`
    records carry none: they pass through unchanged)."""

    partition: int
    value: bytes
    key: Key | None
    old_image: Row | None = None
    new_image: Row | None = None

    @property
    def barrier(self) -> bool:
        return self.key is None

    def expected(self) -> dict[str, Any]:
        """The hydrated record: the input plus the images it lacks."""
        document = exact.loads(self.value)
        if self.barrier:
            return document
        if self.old_image is not None and "oldImage" not in document:
            document["oldImage"] = self.old_image
        if self.new_image is not None and "newImage" not in document:
            document["newImage"] = self.new_image
        return document


def partition_of(key: Key, partitions: int) -> int:
    return key[0] * partitions // ID_SPACE


@dataclass
class YdbTable:
    mode: str = "UPDATES"
    virtual_timestamps: bool = True
    partitions: int = 1
    topic: str = TOPIC
    rows: dict[Key, Row] = field(default_factory=dict)
    log: list[Rendered] = field(default_factory=list)
    unscanned: dict[Key, Row] = field(default_factory=dict)
    step: int = 1_700_000_000_000
    tx: int = 562_949_953_421_312
    snapshot: tuple[int, int] | None = None

    # -- before the changefeed -----------------------------------------------------------------

    def preload(self, key: Key, row: Row) -> None:
        """A row that existed when the changefeed was created with an initial scan."""
        self.rows[key] = self._full(row)
        self.unscanned[key] = self.rows[key]
        self.snapshot = (self.step, self.tx)
        self._tick()

    # -- statements ----------------------------------------------------------------------------

    def upsert(self, key: Key, columns: Row, same_ts: bool = False) -> None:
        """UPSERT: the named columns are written; a new row has the others NULL."""
        old = self._before_change(key, same_ts)
        self._change(key, "update", columns, old, {**self._full({}), **(old or {}), **columns})

    def update(self, key: Key, columns: Row, same_ts: bool = False) -> None:
        """UPDATE ... WHERE key: nothing happens to a row that does not exist."""
        old = self._before_change(key, same_ts)
        if old is None:
            return
        self._change(key, "update", columns, old, {**old, **columns})

    def replace(self, key: Key, columns: Row, same_ts: bool = False) -> None:
        """REPLACE: the row becomes the named columns, every other one NULL."""
        old = self._before_change(key, same_ts)
        self._change(key, "reset", columns, old, self._full(columns))

    def erase(self, key: Key, same_ts: bool = False) -> None:
        """DELETE by key (a blind erase: a row that does not exist still gives a record)."""
        old = self._before_change(key, same_ts)
        self._change(key, "erase", {}, old, None)

    def scan_some(self, count: int) -> None:
        """The initial scan reaches `count` more rows."""
        for key in list(self.unscanned)[:count]:
            self._scan(key)

    def resolved(self) -> None:
        """A heartbeat: a `resolved` barrier in every partition."""
        value = exact.dumps({"resolved": [self.step, self.tx]})
        for partition in range(self.partitions):
            self.log.append(Rendered(partition, value, None))

    def finish_scan(self) -> None:
        self.scan_some(len(self.unscanned))

    # -- rendering -----------------------------------------------------------------------------

    def records(self) -> list[RawRecord]:
        """The log as the topic holds it: per partition, offsets in commit order."""
        offsets = [0] * self.partitions
        out = []
        for rendered in self.log:
            offset = offsets[rendered.partition]
            offsets[rendered.partition] += 1
            out.append(RawRecord(self.topic, rendered.partition, offset, None, rendered.value))
        return out

    def _before_change(self, key: Key, same_ts: bool) -> Row | None:
        """The row a statement finds; its change's virtual timestamp is the previous change's
        when YDB merges the two (`same_ts`), else the next one."""
        if not same_ts:
            self._tick()
        if key in self.unscanned:
            self._scan(key)
        return self.rows.get(key)

    def _scan(self, key: Key) -> None:
        row = self.unscanned.pop(key)
        assert self.snapshot is not None
        self._render(key, "update", row, None, row, self.snapshot)

    def _change(
        self, key: Key, operation: str, columns: Row, old: Row | None, new: Row | None
    ) -> None:
        if new is None:
            self.rows.pop(key, None)
        else:
            self.rows[key] = new
        self._render(key, operation, columns, old, new, (self.step, self.tx))

    def _render(
        self,
        key: Key,
        operation: str,
        columns: Row,
        old: Row | None,
        new: Row | None,
        ts: tuple[int, int],
    ) -> None:
        document: dict[str, Any] = {"key": list(key)}
        if self.mode == "NEW_AND_OLD_IMAGES" and old is not None:
            document["oldImage"] = old
        if self.mode != "UPDATES" and new is not None:
            document["newImage"] = new
        # columns travel in `update`/`reset` only when no image does (YDB's serializer)
        document[operation] = columns if self.mode == "UPDATES" and operation != "erase" else {}
        if self.virtual_timestamps:
            document["ts"] = list(ts)
        rendered = Rendered(
            partition_of(key, self.partitions), exact.dumps(document), key, old, new
        )
        self.log.append(rendered)

    def _tick(self) -> None:
        self.step += 1
        self.tx += 3

    @staticmethod
    def _full(columns: Row) -> Row:
        return {**dict.fromkeys(VALUE_COLUMNS), **columns}


# -- a seeded workload (end-to-end tests, demos) -----------------------------------------------


def random_row(rng: random.Random, columns: tuple[str, ...] | list[str]) -> Row:
    spellings = {
        "name": lambda: rng.choice(["Zürich", "ап", "n€w", ""]) + str(rng.randrange(1000)),
        "amount": lambda: rng.choice([0, 2**64 - 1, rng.randrange(2**64)]),
        "balance": lambda: f"{rng.randrange(-(10**24), 10**24)}.{rng.randrange(10**10):010d}",
        "meta": lambda: {"n": rng.choice([1, 10**30, -(2**63)]), "tags": ["a", None]},
        "blob": lambda: base64.b64encode(rng.randbytes(rng.randrange(12))).decode(),
        "flag": lambda: rng.random() < 0.5,
    }
    return {c: None if rng.random() < 0.1 else spellings[c]() for c in columns}


def random_history(table: YdbTable, seed: int, keys: int, statements: int) -> YdbTable:
    """A reproducible history: a third of the rows preloaded for the initial scan, then
    UPSERTs, UPDATEs, REPLACEs and DELETEs on `keys` rows (a row is created with every
    column named, see test_ydb_properties.py), some merged under the previous change's
    timestamp, some run twice, with barriers now and then."""
    rng = random.Random(seed)
    pool = [(rng.randrange(ID_SPACE), rng.choice(["eu", "us"])) for _ in range(keys)]
    pool = list(dict.fromkeys(pool))
    for key in pool[: len(pool) // 3]:
        table.preload(key, random_row(rng, VALUE_COLUMNS))
    for count in range(statements):
        key = rng.choice(pool)
        same_ts = rng.random() < 0.2
        action = rng.choice(["upsert", "update", "update", "update", "replace", "erase"])
        if action == "erase":
            table.erase(key, same_ts)
            continue
        exists = key in table.rows
        columns = random_row(
            rng, rng.sample(VALUE_COLUMNS, rng.randrange(1, 4)) if exists else VALUE_COLUMNS
        )
        statement = {"upsert": table.upsert, "update": table.update, "replace": table.replace}
        for again in range(2 if rng.random() < 0.1 else 1):
            statement[action](key, columns, same_ts or again > 0)
        if count % 10 == 0:
            table.scan_some(2)
        if count % 40 == 0:
            table.resolved()
    table.finish_scan()
    table.resolved()
    return table
