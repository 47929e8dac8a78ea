"""Raw vs enriched, side by side, for a few telling events; then the counts line."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydrator import exact
from hydrator.core.records import HEADER_FILLED, HEADER_SOURCE, HEADER_UNRESOLVED
from hydrator.demo.truth import JSON, Documents
from hydrator.events import RawRecord
from hydrator.formats.debezium import NEW_KEY_HEADER, OLD_KEY_HEADER
from hydrator.formats.keys import canonical_key

Echo = Callable[[str], None]
NAME_WIDTH = 16


@dataclass(frozen=True)
class Pair:
    raw: RawRecord
    enriched: RawRecord

    @property
    def filled(self) -> list[str]:
        header = self.enriched.header(HEADER_FILLED)
        return header.decode().split(",") if header else []


@dataclass(frozen=True)
class Counts:
    events: int
    filled_columns: int
    unresolved: int
    dead_letters: int

    def line(self) -> str:
        # tests and scripts look for this exact shape
        return (
            f"events {self.events} | filled columns {self.filled_columns} | "
            f"unresolved {self.unresolved} | DLQ {self.dead_letters}"
        )


def pairs(raw: Sequence[RawRecord], enriched: Sequence[RawRecord]) -> list[Pair]:
    by_source = {r.source: r for r in raw}
    out = []
    for record in enriched:
        source = record.header(HEADER_SOURCE)
        if source is not None and source.decode() in by_source:
            out.append(Pair(by_source[source.decode()], record))
    return out


def pick(all_pairs: Sequence[Pair], documents: Documents = JSON) -> list[tuple[str, Pair, str]]:
    """(title, pair, note) of the events worth showing: the update with the most placeholders,
    a primary-key change whose new key took the old row's values, a delete with its before."""
    shown: list[tuple[str, Pair, str]] = []
    updates = [p for p in all_pairs if _op(p.raw, documents) == "u" and p.filled]
    if updates:
        best = max(updates, key=lambda p: len(p.filled))
        shown.append(
            (
                "An UPDATE that left the TOASTed columns alone",
                best,
                f"Debezium shipped {len(best.filled)} columns as placeholders; the hydrator filled "
                "them from the last full row it keeps for this key, and `before` too.",
            )
        )
    key_change = _key_change(all_pairs, documents)
    if key_change is not None:
        create, delete = key_change
        old_key = (create.raw.header(OLD_KEY_HEADER) or b"").decode()
        where = ""
        if delete is not None:
            where = (
                f" The DELETE of the old key is in partition {delete.raw.partition}, this CREATE "
                f"in partition {create.raw.partition}"
                + (
                    ": the old row travelled through the handoff topic."
                    if delete.raw.partition != create.raw.partition
                    else "."
                )
            )
        shown.append(
            (
                f"A primary-key change: UPDATE ... SET id (old key {old_key})",
                create,
                "Debezium ships DELETE(old key) + CREATE(new key); the CREATE's unchanged TOASTed "
                "columns are placeholders, filled from the old key's row." + where,
            )
        )
    deletes = [
        p
        for p in all_pairs
        if _op(p.raw, documents) == "d" and p.raw.header(NEW_KEY_HEADER) is None
    ]
    if deletes:
        shown.append(
            (
                "A DELETE",
                deletes[0],
                "Under the default replica identity `before` holds only the key; the hydrator puts "
                "the whole last row there.",
            )
        )
    return shown


def _key_change(all_pairs: Sequence[Pair], documents: Documents) -> tuple[Pair, Pair | None] | None:
    """A key change's CREATE (and its DELETE), preferring old and new key in different
    partitions, then the most filled columns."""
    deletes: dict[tuple[str, str], Pair] = {}
    for p in all_pairs:
        new_key = p.raw.header(NEW_KEY_HEADER)
        if new_key is not None and p.raw.value is not None and p.raw.key is not None:
            deletes[(documents.key(p.raw.key), canonical_key(new_key))] = p
    candidates = []
    for p in all_pairs:
        old_key = p.raw.header(OLD_KEY_HEADER)
        if old_key is None or p.raw.key is None or not p.filled:
            continue
        delete = deletes.get((canonical_key(old_key), documents.key(p.raw.key)))
        apart = delete is not None and delete.raw.partition != p.raw.partition
        candidates.append(((apart, len(p.filled)), p, delete))
    if not candidates:
        return None
    _, create, delete = max(candidates, key=lambda c: c[0])
    return create, delete


def render(
    title: str,
    pair: Pair,
    note: str,
    echo: Echo,
    width: int | None = None,
    documents: Documents = JSON,
) -> None:
    width = width or min(max(shutil.get_terminal_size((140, 40)).columns, 100), 180)
    side = (width - NAME_WIDTH - 4) // 2
    raw = documents.value(pair.raw.value) or {}
    enriched = documents.value(pair.enriched.value) or {}
    filled = set(pair.filled)
    echo("")
    echo(f"== {title} ".ljust(width, "="))
    key = documents.key(pair.raw.key) if pair.raw.key else "null"
    echo(f"key {_short_text(key, 60)}   raw record {pair.raw.source}")
    for line in _wrap(note, width):
        echo(line)
    echo("")
    echo(_row("", "RAW (what Debezium shipped)", "ENRICHED (what the hydrator wrote)", side))
    echo(_row("op", str(raw.get("op")), str(enriched.get("op")), side))
    for image in ("before", "after"):
        had, got = raw.get(image), enriched.get(image)
        if not isinstance(got, dict) or not isinstance(had, dict):
            summary = f"the previous full row ({len(got)} columns)" if got else "null"
            echo(_row(image, _short(had, side), summary, side))
            continue
        for column, value in got.items():
            before = had.get(column, "-")
            mark = ""
            if image == "after" and column in filled:
                mark = "  <- filled"
            elif before != value:
                mark = "  <- from state"
            shown = _short(value, side - len(mark)) + mark
            echo(_row(f"{image}.{column}", _short(before, side), shown, side))
    added = [
        f"{name}={(value or b'').decode()}"
        for name, value in pair.enriched.headers
        if name in (HEADER_FILLED, HEADER_UNRESOLVED, HEADER_SOURCE)
    ]
    moved = [
        f"{name}={(value or b'').decode()}"
        for name, value in pair.raw.headers
        if name in (OLD_KEY_HEADER, NEW_KEY_HEADER)
    ]
    echo(
        _row(
            "headers",
            _short_text(" ".join(moved) or "-", side),
            _short_text("+ " + " ".join(added), side),
            side,
        )
    )


def render_document(
    title: str,
    pair: Pair,
    note: str,
    echo: Echo,
    label: str,
    width: int | None = None,
) -> None:
    """Raw vs enriched for any JSON envelope: a row per member, and a row per column of a member
    the hydrator changed or added (an image), marking what it added or filled. The enriched
    side is the wider: that is where the long values are."""
    width = width or min(max(shutil.get_terminal_size((140, 40)).columns, 100), 180)
    # numbers as written (a DECIMAL's 12.30 is shown as 12.30)
    raw = exact.loads(pair.raw.value or b"null", decimals=True)
    enriched = exact.loads(pair.enriched.value or b"null", decimals=True)
    rows = _document_rows(raw, enriched)
    name_width = min(max((len(name) for name, _, _ in rows), default=8), 24)
    left = (width - name_width - 4) * 2 // 5
    right = width - name_width - 4 - left
    echo("")
    echo(f"== {title} ".ljust(width, "="))
    key = pair.raw.key.decode("utf-8", "replace") if pair.raw.key is not None else "null"
    echo(f"Kafka key {_short_text(key, 60)}   raw record {pair.raw.source}")
    for line in _wrap(note, width):
        echo(line)
    echo("")

    def row(name: str, had: str, got: str) -> str:
        return f"{name[:name_width].ljust(name_width)}  {had[:left].ljust(left)}  {got[:right]}"

    echo(row("", f"RAW (what {label} shipped)", "ENRICHED (what the hydrator wrote)"))
    for name, had, got in rows:
        mark = _mark(had, got)
        echo(row(name, _shown(had, left), _shown(got, right - len(mark)) + mark))
    added = [
        f"{name}={(value or b'').decode()}"
        for name, value in pair.enriched.headers
        if name in (HEADER_FILLED, HEADER_UNRESOLVED, HEADER_SOURCE)
    ]
    echo(row("headers", "-", _short_text("+ " + " ".join(added), right)))


def _document_rows(raw: Any, enriched: Any) -> list[tuple[str, Any, Any]]:
    """(name, raw value, enriched value) per member. An object the hydrator changed or added is
    shown column by column, and so is an unchanged one whose columns are all among those (the
    image it was computed from); any other member on one row."""
    if not isinstance(raw, dict) or not isinstance(enriched, dict):
        return [("value", raw, enriched)]
    names = [*raw, *(n for n in enriched if n not in raw)]
    touched = {
        column
        for name in names
        if isinstance(got := enriched.get(name), dict) and raw.get(name, _NOT_THERE) != got
        for column in got
    }
    rows: list[tuple[str, Any, Any]] = []
    for name in names:
        had, got = raw.get(name, _NOT_THERE), enriched.get(name, _NOT_THERE)
        image = isinstance(got, dict) and got and (had != got or got.keys() <= touched)
        if image and (had is _NOT_THERE or had is None or isinstance(had, dict)):
            columns = had if isinstance(had, dict) else {}
            rows += [(f"{name}.{c}", columns.get(c, _NOT_THERE), v) for c, v in got.items()]
        else:
            rows.append((name, had, got))
    return rows


_NOT_THERE = object()


def _shown(value: Any, width: int) -> str:
    if value is _NOT_THERE:
        return "-"
    text = exact.dumps(value).decode()
    if len(text) <= width:
        return text
    return _short_text(text, width) if isinstance(value, dict) else _short(value, width)


def _mark(had: Any, got: Any) -> str:
    if had is _NOT_THERE:
        return "  <- added"
    return "  <- filled" if had != got else ""


def _op(record: RawRecord, documents: Documents) -> str | None:
    value = documents.value(record.value)
    return None if value is None else value.get("op")


def _row(name: str, left: str, right: str, side: int) -> str:
    return f"{name[:NAME_WIDTH].ljust(NAME_WIDTH)}  {left[:side].ljust(side)}  {right[:side]}"


def _short(value: Any, width: int) -> str:
    """A value abbreviated to `width`: long strings and lists say how long they are."""
    text = exact.dumps(value).decode()
    if len(text) <= width:
        return text
    if isinstance(value, str):
        return f'"{value[: max(width - 24, 8)]}..." ({len(value)} chars)'
    if isinstance(value, list):
        head = exact.dumps(value[:3]).decode()[:-1]
        return f"{head[: max(width - 20, 8)]},...] ({len(value)} items)"
    if isinstance(value, dict):
        return f"{{...}} ({len(value)} keys)"
    return _short_text(text, width)


def _short_text(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 1)] + "..."


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def counts_from(engine_counts: Mapping[str, int]) -> Counts:
    return Counts(
        events=engine_counts.get("records", 0),
        filled_columns=engine_counts.get("filled_columns", 0),
        unresolved=engine_counts.get("unresolved_columns", 0),
        dead_letters=engine_counts.get("dead_letters", 0),
    )
