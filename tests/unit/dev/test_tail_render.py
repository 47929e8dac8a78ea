"""How `hydrator tail` shows a record: headers in order, long values abbreviated with their length,
a dead letter's reason and source first, anything that is not JSON summarised, never a crash."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hydrator.dev.render import (
    LONG_ARRAY_SHOWN,
    LONG_STRING,
    LONG_STRING_SHOWN,
    TailRecord,
    ordered_headers,
    render,
    show_key,
    show_value,
)


def _record(value: object, headers: list[tuple[str, bytes | None]] | None = None) -> TailRecord:
    raw = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    return TailRecord("t.enriched", 2, 17, b'{"id":1}', raw, headers or [])


def test_title_line_names_topic_partition_offset_and_key() -> None:
    lines = render(_record({"op": "c"}))
    assert lines[0] == '── t.enriched [2] @17  key {"id": 1}'


def test_hydrator_headers_come_first_in_their_order() -> None:
    headers = [
        ("__debezium.context.taskId", b"0"),
        ("hydrator.filled", b"bio,tags"),
        ("other", None),
        ("hydrator.source", b"t:2:17"),
    ]
    assert [n for n, _ in ordered_headers(headers)] == [
        "hydrator.filled",
        "hydrator.source",
        "__debezium.context.taskId",
        "other",
    ]
    lines = render(_record({"op": "u"}, headers))
    assert lines[1:5] == [
        "hydrator.filled: bio,tags",
        "hydrator.source: t:2:17",
        "__debezium.context.taskId: 0",
        "other: (null)",
    ]


def test_a_long_string_is_cut_and_says_its_length() -> None:
    bio = "x" * 3000
    text = "\n".join(show_value(json.dumps({"after": {"id": 1, "bio": bio}}).encode()))
    assert f'"bio": "{"x" * LONG_STRING_SHOWN}…" (3000 chars)' in text
    assert "x" * (LONG_STRING_SHOWN + 1) not in text


def test_full_shows_every_character() -> None:
    bio = "x" * 3000
    text = "\n".join(show_value(json.dumps({"bio": bio}).encode(), full=True))
    assert f'"bio": "{bio}"' in text


def test_a_string_at_the_limit_is_whole() -> None:
    text = "\n".join(show_value(json.dumps({"s": "y" * LONG_STRING}).encode()))
    assert f'"{"y" * LONG_STRING}"' in text


def test_a_long_array_shows_its_first_items_and_its_length() -> None:
    text = "\n".join(show_value(json.dumps({"scores": list(range(1000))}).encode()))
    first = ", ".join(str(i) for i in range(LONG_ARRAY_SHOWN))
    assert f'"scores": [{first}, … (1000 items)]' in text


def test_a_row_is_indented_one_column_per_line() -> None:
    lines = show_value(json.dumps({"after": {"id": 1, "name": "a"}, "op": "u"}).encode())
    assert lines == [
        "{",
        '  "after": {',
        '    "id": 1,',
        '    "name": "a"',
        "  },",
        '  "op": "u"',
        "}",
    ]


def test_numbers_are_shown_as_written() -> None:
    raw = b'{"big": 123456789012345678901234567890, "price": 1.10}'
    text = "\n".join(show_value(raw))
    assert '"big": 123456789012345678901234567890' in text
    assert '"price": 1.10' in text


def test_a_schema_envelope_shows_its_payload() -> None:
    raw = json.dumps({"schema": {"type": "struct", "fields": []}, "payload": {"op": "c"}}).encode()
    assert show_value(raw) == ["(schema omitted)", "{", '  "op": "c"', "}"]
    assert show_key(json.dumps({"schema": {"type": "int32"}, "payload": {"id": 7}}).encode()) == (
        '{"id": 7}'
    )


def test_debezium_source_block_is_one_line() -> None:
    source = {f"field{i}": "v" * 10 for i in range(16)}
    lines = show_value(json.dumps({"source": source, "op": "u"}).encode())
    assert lines[1].startswith('  "source": {"field0": "vvvvvvvvvv"')
    assert lines[1].endswith("… (16 fields)},")
    assert len(lines) == 4


def test_a_tombstone_and_bytes_that_are_not_json() -> None:
    assert show_value(None) == ["(null value: a tombstone)"]
    assert show_value(b"\x00\x01garbage") == ["(9 bytes, not JSON) b'\\x00\\x01garbage'"]
    assert show_key(None) == "null"
    assert show_key(b"\xff") == "(1 bytes, not JSON) b'\\xff'"


def test_dlq_puts_reason_and_source_first() -> None:
    headers = [
        ("x-app", b"1"),
        ("hydrator.error", b"InvalidJson: value is not JSON"),
        ("hydrator.source", b"dev.public.t:0:5"),
    ]
    lines = render(_record(b"not json", headers), dlq=True)
    assert lines[1] == "reason: InvalidJson: value is not JSON"
    assert lines[2] == "source: dev.public.t:0:5"
    assert lines[3] == "x-app: 1"
    assert lines[4].startswith("(8 bytes, not JSON)")


def test_dlq_says_when_a_record_has_no_reason() -> None:
    lines = render(_record({"op": "c"}), dlq=True)
    assert lines[1:3] == ["reason: (no hydrator.error)", "source: (no hydrator.source)"]


def test_a_long_header_value_is_cut() -> None:
    lines = render(_record({}, [("hydrator.error", b"e" * 1000)]))
    assert lines[1].endswith("… (1000 chars)")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=200),
    lambda children: (
        st.lists(children, max_size=12)
        | st.dictionaries(st.text(max_size=10), children, max_size=6)
    ),
    max_leaves=40,
)


@given(_json)
def test_any_json_renders_and_full_mode_loses_nothing(document: object) -> None:
    raw = json.dumps(document).encode()
    lines = show_value(raw, full=True)
    if not (isinstance(document, dict) and set(document) == {"schema", "payload"}):
        assert json.loads("\n".join(lines)) == document
    show_value(raw)  # abbreviated: never raises


@given(st.binary(max_size=300))
def test_any_bytes_render(raw: bytes) -> None:
    render(TailRecord("t", 0, 0, raw, raw, [("h", raw)]), dlq=True)
