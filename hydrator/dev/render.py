"""How `hydrator tail` shows one record: pure functions from a record's parts to lines of text.

A hydrated row can hold values of many kilobytes (that is why it needed hydrating), so a value is
shown as a tree with long strings and long arrays abbreviated, each saying how long it really
is: the shape of a full row fits on a screen, and `full=True` shows every byte. A Kafka Connect
`schema`/`payload` envelope is shown as its payload (the schema is the same on every record).
The hydrator's own headers come first: they say what was filled, what is still missing and, on a
dead letter, why it was refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hydrator import exact
from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE

# Strings longer than this are cut to their first LONG_STRING_SHOWN characters.
LONG_STRING = 80
LONG_STRING_SHOWN = 40
# Arrays longer than this show their first LONG_ARRAY_SHOWN items.
LONG_ARRAY = 8
LONG_ARRAY_SHOWN = 3
LONG_HEADER = 200
# Fields shown on one line, cut at ONE_LINE characters: a CDC envelope's block about where the
# change came from (Debezium's `source`) is the same few facts on every record.
ONE_LINE_FIELDS = frozenset({"source"})
ONE_LINE = 100
INDENT = "  "
HYDRATOR_PREFIX = "hydrator."


@dataclass(frozen=True)
class TailRecord:
    """One consumed record, as `hydrator tail` needs it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()

    def header(self, name: str) -> bytes | None:
        """The last value of header `name` (None when absent)."""
        found = None
        for header_name, value in self.headers:
            if header_name == name:
                found = value
        return found


def render(record: TailRecord, dlq: bool = False, full: bool = False) -> list[str]:
    """The lines that show `record`: a title line, the dead letter's reason and source (with
    `dlq`), the headers (hydrator.* first), then the value."""
    lines = [f"── {record.topic} [{record.partition}] @{record.offset}  key {show_key(record.key)}"]
    headers = ordered_headers(record.headers)
    if dlq:
        reason = record.header(HEADER_ERROR)
        source = record.header(HEADER_SOURCE)
        lines.append(f"reason: {_text(reason) if reason is not None else '(no hydrator.error)'}")
        lines.append(f"source: {_text(source) if source is not None else '(no hydrator.source)'}")
        headers = [(n, v) for n, v in headers if n not in (HEADER_ERROR, HEADER_SOURCE)]
    lines.extend(f"{name}: {_header_value(value, full)}" for name, value in headers)
    lines.extend(show_value(record.value, full))
    return lines


def ordered_headers(
    headers: Sequence[tuple[str, bytes | None]],
) -> list[tuple[str, bytes | None]]:
    """hydrator.* headers first, each group in the order the record carries them."""
    ours = [(n, v) for n, v in headers if n.startswith(HYDRATOR_PREFIX)]
    theirs = [(n, v) for n, v in headers if not n.startswith(HYDRATOR_PREFIX)]
    return [*ours, *theirs]


def show_key(key: bytes | None) -> str:
    """A key on one line: its JSON (the payload of an envelope), or its bytes."""
    if key is None:
        return "null"
    document = _json(key)
    if document is _NOT_JSON:
        return _bytes_summary(key, full=False)
    return _inline(_payload(document))


def show_value(value: bytes | None, full: bool = False) -> list[str]:
    """A value as indented lines; a null value is a tombstone."""
    if value is None:
        return ["(null value: a tombstone)"]
    document = _json(value)
    if document is _NOT_JSON:
        return [_bytes_summary(value, full)]
    payload = _payload(document)
    note = ["(schema omitted)"] if payload is not document else []
    return [*note, *_tree(payload, full, "")]


class _NotJson:
    pass


_NOT_JSON = _NotJson()


def _json(raw: bytes) -> Any:
    try:
        return exact.loads(raw, decimals=True)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


def _payload(document: Any) -> Any:
    """The payload of a Kafka Connect `schema`/`payload` envelope; anything else as it is."""
    if isinstance(document, dict) and set(document) == {"schema", "payload"}:
        return document["payload"]
    return document


def _tree(value: Any, full: bool, indent: str) -> list[str]:
    """`value` as lines: a dict or a long array over several lines, anything else on one."""
    if isinstance(value, dict) and value:
        lines = ["{"]
        inner = indent + INDENT
        items = list(value.items())
        for i, (name, item) in enumerate(items):
            comma = "," if i < len(items) - 1 else ""
            if not full and name in ONE_LINE_FIELDS and isinstance(item, dict):
                sub = [_one_line(item)]
            else:
                sub = _tree(item, full, inner)
            lines.append(f"{inner}{_string(str(name), True)}: {sub[0]}")
            lines.extend(sub[1:])
            lines[-1] += comma
        lines.append(f"{indent}}}")
        return lines
    if isinstance(value, list) and any(isinstance(v, dict | list) and v for v in value):
        lines = ["["]
        inner = indent + INDENT
        shown = value if full or len(value) <= LONG_ARRAY else value[:LONG_ARRAY_SHOWN]
        for i, item in enumerate(shown):
            sub = _tree(item, full, inner)
            lines.append(f"{inner}{sub[0]}")
            lines.extend(sub[1:])
            if i < len(shown) - 1 or len(shown) < len(value):
                lines[-1] += ","
        if len(shown) < len(value):
            lines.append(f"{inner}… ({len(value)} items)")
        lines.append(f"{indent}]")
        return lines
    return [_scalar_or_flat(value, full)]


def _scalar_or_flat(value: Any, full: bool) -> str:
    if isinstance(value, list):
        if not full and len(value) > LONG_ARRAY:
            head = ", ".join(_scalar_or_flat(v, full) for v in value[:LONG_ARRAY_SHOWN])
            return f"[{head}, … ({len(value)} items)]"
        return "[" + ", ".join(_scalar_or_flat(v, full) for v in value) + "]"
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, str):
        return _string(value, full)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Decimal | int | float):
        return str(value)
    return repr(value)


def _string(text: str, full: bool) -> str:
    """A JSON string literal; a long one cut, with its real length."""
    if full or len(text) <= LONG_STRING:
        return _quote(text)
    return f'{_quote(text[:LONG_STRING_SHOWN])[:-1]}…" ({len(text)} chars)'


def _quote(text: str) -> str:
    return exact.dumps(text).decode()


def _inline(value: Any) -> str:
    """A small document on one line, long strings still cut."""
    if isinstance(value, dict):
        inner = ", ".join(f"{_quote(str(k))}: {_inline(v)}" for k, v in value.items())
        return "{" + inner + "}"
    return _scalar_or_flat(value, full=False)


def _one_line(value: dict[str, Any]) -> str:
    text = _inline(value)
    if len(text) <= ONE_LINE:
        return text
    return f"{text[:ONE_LINE]}… ({len(value)} fields)}}"


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


def _header_value(raw: bytes | None, full: bool) -> str:
    if raw is None:
        return "(null)"
    text = _text(raw)
    if full or len(text) <= LONG_HEADER:
        return text
    return f"{text[:LONG_HEADER]}… ({len(text)} chars)"


def _bytes_summary(raw: bytes, full: bool) -> str:
    """Bytes that are not JSON: their length and their start."""
    shown = raw if full else raw[:LONG_STRING_SHOWN]
    more = "" if len(shown) == len(raw) else "…"
    return f"({len(raw)} bytes, not JSON) {shown!r}{more}"
