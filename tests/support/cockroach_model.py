"""A model of a CockroachDB changefeed into Kafka (`format=json`, `envelope=wrapped`,
`WITH updated`, optionally `diff`, `mvcc_timestamp`, `key_in_value`) over one table, and of
what the enriched topic must then hold.

The table's rows change through inserts, updates, deletes (also of rows that never existed) and
an added column (a backfill that re-emits every row). The changefeed delivers each new version
once, in order per key, and then what at-least-once delivery adds: exact duplicates, duplicates
of versions already sent arriving after later ones, replays of everything since a checkpoint
after a restart, and `resolved` messages with a null key. The expected enriched message for
each version's first delivery is the message plus `before` = the previous full row (`null`
when the key had none); every later delivery is stale.

Values are kept as JSON text, rendered with CockroachDB's spacing and its spelling of decimals,
so nothing here goes through the hydrator's codec or its JSON module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

WALL_START = 1_700_000_000_000_000_000  # nanoseconds, as CockroachDB's HLC wall time
Row = dict[str, str]  # column -> its JSON text


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes
    row_key: str | None  # the model's identity of the row (None: a resolved message)
    expected: bytes | None  # the enriched value of a first delivery; None: stale or passed on


@dataclass
class Version:
    updated: tuple[int, int]
    message: Message


@dataclass
class ChangefeedModel:
    diff: bool = False
    mvcc_timestamp: bool = False
    key_in_value: bool = False
    rows: dict[str, Row | None] = field(default_factory=dict)  # row key -> row (None: deleted)
    versions: dict[str, list[Version]] = field(default_factory=dict)
    log: list[Message] = field(default_factory=list)
    clock: tuple[int, int] = (WALL_START, 0)
    columns_added: int = 0

    # -- the table -------------------------------------------------------------------------------

    def live_keys(self) -> list[str]:
        return sorted(k for k, row in self.rows.items() if row is not None)

    def write(self, pk: list[str], row: Row | None, clock: str = "wall") -> None:
        """A row's new version (None: a delete) and its first delivery. `clock`: how the HLC
        moves for it: `wall` (time passes; by a few nanoseconds, which a double cannot tell
        apart at this magnitude), `logical` (the counter within one wall time), `same` (another
        row of the previous write's transaction; a row written twice in one transaction
        shows only its last write, so this row's second write moves the clock)."""
        key = key_text(pk)
        if row is not None:
            row = {**self.extra_columns(), **row}
        if clock != "same" or key in self._keys_at(self.clock):
            self.advance(logical=clock == "logical")
        self._emit_version(key, row)

    def add_column(self, name: str, default_text: str) -> None:
        """ALTER TABLE … ADD COLUMN with a default: the backfill first re-emits every watched
        row as it was (duplicates), then every row again, now with the column, at a new
        timestamp."""
        self.columns_added += 1
        for key in self.live_keys():
            self.log.append(self.versions[key][-1].message)
        self.advance()
        for key in self.live_keys():
            row = self.rows[key]
            assert row is not None
            self._emit_version(key, {**row, name: default_text})

    def extra_columns(self) -> Row:
        return {f"added{i}": "true" for i in range(self.columns_added)}

    # -- delivery --------------------------------------------------------------------------------

    def duplicate(self, back: int) -> None:
        """The message `back` deliveries ago again, as it was (a retried produce)."""
        if self.log:
            self.log.append(self.log[-min(back, len(self.log))])

    def stale_version(self, key: str, index: int) -> None:
        """An earlier version of `key` again, after later ones (a node failure's retry)."""
        versions = self.versions.get(key)
        if versions:
            self.log.append(versions[index % len(versions)].message)

    def restart(self, back: int) -> None:
        """The changefeed restarts from a checkpoint `back` versions ago: every version since,
        of every key, is delivered again in timestamp order."""
        every = sorted(
            (v.updated, i, v.message)
            for i, versions in enumerate(self.versions.values())
            for v in versions
        )
        if every:
            checkpoint = every[-min(back, len(every))][0]
            self.log += [message for updated, _, message in every if updated >= checkpoint]

    def resolved(self) -> None:
        wall, logical = self.clock
        value = json.dumps({"resolved": f"{wall}.{logical:010d}"}).encode()
        self.log.append(Message(None, value, None, None))

    # -- internals -------------------------------------------------------------------------------

    def advance(self, logical: bool = False) -> None:
        wall, counter = self.clock
        self.clock = (wall, counter + 1) if logical else (wall + 7, 0)

    def _keys_at(self, updated: tuple[int, int]) -> set[str]:
        return {k for k, vs in self.versions.items() if vs and vs[-1].updated == updated}

    def _emit_version(self, key: str, row: Row | None) -> None:
        previous = self.rows.get(key)
        wall, logical = self.clock
        members = {"after": render(row)}
        if self.diff:
            members["before"] = render(previous)
        if self.key_in_value:
            members["key"] = key
        members["updated"] = json.dumps(f"{wall}.{logical:010d}")
        if self.mvcc_timestamp:
            members["mvcc_timestamp"] = json.dumps(f"{wall - 3}.{logical:010d}")
        value = render_object(members)
        expected = value if self.diff else render_object({**members, "before": render(previous)})
        message = Message(key.encode(), value.encode(), key, expected.encode())
        self.rows[key] = row
        self.versions.setdefault(key, []).append(Version(self.clock, message))
        self.log.append(message)


def key_text(pk: list[str]) -> str:
    """The Kafka key: the JSON array of the primary key values."""
    return "[" + ", ".join(pk) + "]"


def render(row: Row | None) -> str:
    return "null" if row is None else render_object(row)


def render_object(members: dict[str, str]) -> str:
    """An object as CockroachDB's JSON encoder writes it: `{"a": 1, "b": "x"}`."""
    return "{" + ", ".join(f"{json.dumps(name)}: {text}" for name, text in members.items()) + "}"


def as_written(raw: bytes) -> Any:
    """A JSON document with every number kept as the text it was written with, so that two
    documents compare equal only when their numbers are spelled alike (`1.10` is not `1.1`)."""
    return json.loads(raw, parse_float=_number, parse_int=_number)


def _number(text: str) -> tuple[str, str]:
    return ("number", text)
