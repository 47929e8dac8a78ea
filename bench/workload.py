"""The benchmark's workload: Debezium Postgres change events (JsonConverter, no schema envelope)
of a table with a ~1 KB row and one large TOASTed text column `doc`, and what a correct hydrator
must make of each of them.

Every key is inserted once, then updated in rounds (each round touches every key once, in a
shuffled order), so there is always a stored row to fill from. Under the default replica
identity an update ships `before` as null, and `doc`, when unchanged, as Debezium's placeholder
(`--placeholder-ratio` of the updates); the other updates give `doc` a new value. Each event's
`source.lsn` is unique (1, 2, …) and names the event in the truth.

Pure: nothing here does I/O.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

PLACEHOLDER = "__debezium_unavailable_value"
TABLE = "customers"
_WORDS = [
    "order",
    "ship",
    "pay",
    "cart",
    "item",
    "note",
    "gift",
    "card",
    "mail",
    "post",
    "city",
    "road",
    "lane",
    "park",
    "bank",
    "fund",
    "rate",
    "plan",
    "team",
    "user",
    "name",
    "time",
    "date",
    "week",
    "year",
    "list",
    "data",
    "node",
    "edge",
    "path",
    "file",
    "page",
    "link",
    "text",
]
_NO_VERSION = -1


@dataclass(frozen=True)
class WorkloadShape:
    events: int = 100_000
    keys: int = 10_000
    row_bytes: int = 1_000
    toast_bytes: int = 8_000
    placeholder_ratio: float = 0.5
    seed: int = 13

    def __post_init__(self) -> None:
        if self.keys < 1:
            raise ValueError("--keys must be at least 1")
        if self.events < self.keys:
            raise ValueError(f"--events ({self.events}) must be at least --keys ({self.keys})")
        if not 0.0 <= self.placeholder_ratio <= 1.0:
            raise ValueError("--placeholder-ratio must be between 0 and 1")
        if self.toast_bytes < 64 or self.row_bytes < 200:
            raise ValueError("--toast-bytes must be at least 64 and --row-bytes at least 200")


@dataclass
class Truth:
    """Per event (index = lsn - 1): its key, the `doc` version its full row holds, and the one
    the previous row held (-1 for an insert). Versions name values through `Docs.text`."""

    keys: array = field(default_factory=lambda: array("l"))
    versions: array = field(default_factory=lambda: array("l"))
    previous: array = field(default_factory=lambda: array("l"))
    placeholders: int = 0

    def __len__(self) -> int:
        return len(self.keys)


class Docs:
    """The TOASTed values: `text(key, version)` is deterministic and cheap, distinct per
    (key, version), and word-like, so it compresses as text does."""

    def __init__(self, size: int, seed: int) -> None:
        rng = random.Random(seed)
        self._size = size
        self._pool = [
            " ".join(rng.choices(_WORDS, k=size // 3 + 8))[: size + 64].encode() for _ in range(61)
        ]

    def text(self, key: int, version: int) -> str:
        prefix = b"%d/%d " % (key, version)
        body = self._pool[(key * 7 + version) % len(self._pool)]
        return (prefix + body[: self._size - len(prefix)]).decode()


def _row(key: int, visits: int, filler: str, doc: str) -> dict:
    return {
        "id": key,
        "name": f"customer {key}",
        "email": f"customer{key}@example.com",
        "status": "active" if visits % 5 else "new",
        "visits": visits,
        "balance": visits * 17 % 100_000,
        "notes": filler,
        "doc": doc,
    }


class Workload:
    """The events in order, produced lazily (a 100k-event workload is ~0.5 GB of values), and
    the truth filled in as they are made."""

    def __init__(self, shape: WorkloadShape) -> None:
        self.shape = shape
        self.docs = Docs(shape.toast_bytes, shape.seed)
        base = len(orjson.dumps(_row(shape.keys, 1_000, "", "")))
        self._filler = "n" * max(0, shape.row_bytes - base)
        self.truth = Truth()

    def key_bytes(self, key: int) -> bytes:
        return b'{"id":%d}' % key

    def events(self) -> Iterator[tuple[int, bytes, bytes]]:
        """(key, key bytes, value bytes) of every event, in the order they are produced."""
        shape = self.shape
        rng = random.Random(shape.seed)
        version = [0] * shape.keys
        visits = [0] * shape.keys
        truth = self.truth = Truth()  # made anew: the events are the same every time
        order: list[int] = []
        for lsn in range(1, shape.events + 1):
            if lsn <= shape.keys:
                key, op = lsn - 1, "c"
                doc = self.docs.text(key, 0)
                truth.previous.append(_NO_VERSION)
            else:
                if not order:
                    order = list(range(shape.keys))
                    rng.shuffle(order)
                key, op = order.pop(), "u"
                truth.previous.append(version[key])
                visits[key] += 1
                if rng.random() < shape.placeholder_ratio:
                    doc = PLACEHOLDER
                    truth.placeholders += 1
                else:
                    version[key] += 1
                    doc = self.docs.text(key, version[key])
            truth.keys.append(key)
            truth.versions.append(version[key])
            yield key, self.key_bytes(key), self.value(op, key, visits[key], doc, lsn)

    def value(self, op: str, key: int, visits: int, doc: str, lsn: int) -> bytes:
        return orjson.dumps(
            {
                "before": None,
                "after": _row(key, visits, self._filler, doc),
                "source": {
                    "version": "3.0.0.Final",
                    "connector": "postgresql",
                    "name": "bench",
                    "ts_ms": 1_700_000_000_000 + lsn,
                    "snapshot": "false",
                    "db": "shop",
                    "sequence": f'["{lsn - 1}","{lsn}"]',
                    "schema": "public",
                    "table": TABLE,
                    "txId": lsn,
                    "lsn": lsn,
                    "xmin": None,
                },
                "op": op,
                "ts_ms": 1_700_000_000_000 + lsn,
                "transaction": None,
            }
        )

    def previous_row(self, lsn: int) -> tuple[int, int] | None:
        """(key, doc version) the row held before event `lsn`; None for an insert."""
        index = lsn - 1
        previous = self.truth.previous[index]
        return None if previous == _NO_VERSION else (self.truth.keys[index], previous)


@dataclass
class Verdict:
    """What a runner's output says about its hydration."""

    records: int = 0
    distinct: int = 0
    missing: int = 0
    placeholders_left: int = 0
    wrong_values: int = 0
    before_unfilled: int = 0
    unreadable: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return self.records - self.unreadable - self.distinct

    def summary(self) -> str:
        """ "ok", or what is wrong ("WRONG: …"); repeats alone are not wrong (at-least-once)."""
        problems = [
            f"{count} {what}"
            for count, what in (
                (self.missing, "missing"),
                (self.unreadable, "unreadable"),
                (self.placeholders_left, "placeholders left"),
                (self.wrong_values, "wrong values"),
                (self.before_unfilled, "before unfilled"),
            )
            if count
        ]
        repeats = f"{self.duplicates} repeated" if self.duplicates else ""
        if problems:
            return "WRONG: " + ", ".join([*problems, repeats] if repeats else problems)
        return f"ok, {repeats}" if repeats else "ok"


class Checker:
    """Checks output records against the truth, one at a time (the output is read once), as
    the workload's events are made: an output is checked after its event."""

    def __init__(self, workload: Workload, hydrates: bool = True) -> None:
        self._workload = workload
        self._hydrates = hydrates
        self._seen = bytearray(workload.shape.events)
        self.verdict = Verdict()

    def check(self, value: bytes | None) -> None:
        verdict = self.verdict
        verdict.records += 1
        try:
            event = orjson.loads(value or b"")
            lsn = int(event["source"]["lsn"])
            after = event["after"]
            index = lsn - 1
            if not 0 <= index < len(self._seen):
                raise ValueError(f"lsn {lsn} is not in the workload")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            verdict.unreadable += 1
            self._example(f"unreadable output: {exc!r}")
            return
        if not self._seen[index]:
            self._seen[index] = 1
            verdict.distinct += 1
        if not self._hydrates:
            return
        truth = self._workload.truth
        key = truth.keys[index]
        doc = after.get("doc")
        if doc == PLACEHOLDER:
            verdict.placeholders_left += 1
            self._example(f"lsn {lsn}: doc is still the placeholder")
        elif doc != self._workload.docs.text(key, truth.versions[index]):
            verdict.wrong_values += 1
            self._example(f"lsn {lsn}: doc is not the row's value")
        previous = self._workload.previous_row(lsn)
        if previous is not None:
            before = event.get("before") or {}
            if before.get("doc") != self._workload.docs.text(*previous):
                verdict.before_unfilled += 1
                self._example(f"lsn {lsn}: before is not the previous row")

    def finish(self) -> Verdict:
        self.verdict.missing = len(self._seen) - self.verdict.distinct
        return self.verdict

    def _example(self, text: str) -> None:
        if len(self.verdict.examples) < 5:
            self.verdict.examples.append(text)
