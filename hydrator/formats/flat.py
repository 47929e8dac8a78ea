"""Flattened rows: Debezium events after the `ExtractNewRecordState` SMT (`transforms=unwrap`).

The value is the row itself, its columns at top level, plus the `__` fields `add.fields` asks
for (`__op`, `__lsn`, `__source_ts_ms`, ...) and `__deleted` under
`delete.tombstone.handling.mode=rewrite`. Unchanged TOAST columns still hold the placeholder.

* op: `__op` (c/u/r/d); `__deleted: "true"` is a delete; a Kafka tombstone is a delete of its
  key (the SMT's default turns deletes into tombstones). Without `__op`, a row is an update.
* position: `__source_sequence` (`["<lastCommitLsn>","<lsn>"]`), else `__lsn` /
  `__source_lsn`: as the JSON envelope's `source`. Without one, no staleness check.
* identity: the Kafka key, as for the JSON envelope; key changes travel in the
  `__debezium.oldkey/newkey` headers, which the SMT keeps. A row without a key is bad input.
* output: the same flat row, `__` fields kept, placeholders filled; a rewritten delete carries
  the whole last row; a tombstone stays a tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hydrator import exact
from hydrator.events import BadInput, ChangeEvent, InvalidKey, Op, Patch, RawRecord, Read
from hydrator.formats import values
from hydrator.formats.debezium import (
    JSON_KEYS,
    NEW_KEY_HEADER,
    OLD_KEY_HEADER,
    OPS,
    KeyReader,
    header_key,
    position,
    unwrap,
)
from hydrator.formats.keys import canonical_key
from hydrator.formats.placeholders import PlaceholderForms

PREFIX = "__"
DELETED = "__deleted"
# Which `add.fields` carry the event's position, best first, as `source` names them.
_POSITION_FIELDS = (("__source_sequence", "sequence"), ("__lsn", "lsn"), ("__source_lsn", "lsn"))
# The columns of a row that hold the placeholder.
MissingInRow = Callable[[dict[str, Any]], tuple[str, ...]]


class _Row:
    """What encode() needs: the value's bytes, its root document and the row (its payload)."""

    __slots__ = ("raw", "root", "row")

    def __init__(self, raw: bytes | None, root: dict[str, Any] | None, row: dict[str, Any] | None):
        self.raw = raw
        self.root = root
        self.row = row


def is_flat(document: Any) -> bool:
    """A flattened row: an object (or a schema envelope's payload) with `__op` or `__deleted`."""
    if not isinstance(document, dict):
        return False
    if "schema" in document and isinstance(document.get("payload"), dict):
        document = document["payload"]
    return "__op" in document or DELETED in document


def columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's columns, its `__` fields aside."""
    return {c: v for c, v in row.items() if not c.startswith(PREFIX)}


class FlatCodec:
    name = "debezium-flat"
    key_in_record_key = True

    def __init__(self, forms: PlaceholderForms) -> None:
        self.forms = forms

    def key(self, read: Read) -> str | None:
        return require_key(read.record.key, canonical_key)

    def accepts(self, document: Any) -> bool:
        return is_flat(document)

    def decode(self, read: Read) -> ChangeEvent:  # a tombstone is a delete: none passes
        record = read.record
        if record.value is None:
            return self.decode_row(record, None, None, _no_missing)
        root = values.document_object(read)
        row, schema = unwrap(root)
        fields = _row_fields(schema)
        if fields is None:
            return self.decode_row(record, root, row, self.forms.shaped_columns)
        matches = self.forms.matches_schema

        def missing(image: dict[str, Any]) -> tuple[str, ...]:
            return tuple(
                c
                for c, v in image.items()
                if v is not None and (f := fields.get(c)) is not None and matches(v, f)
            )

        return self.decode_row(record, root, row, missing)

    def decode_row(
        self,
        record: RawRecord,
        root: dict[str, Any] | None,
        row: dict[str, Any] | None,
        missing: MissingInRow,
        keys: KeyReader = JSON_KEYS,
    ) -> ChangeEvent:
        """The change event of a decoded row (None: a Kafka tombstone); `missing(image)` names
        its columns holding the placeholder. Also used for Avro rows (hydrator.formats.avro)."""
        if record.key is None:
            raise BadInput("a flattened row without a Kafka key: its row cannot be told")
        old_key = header_key(record, OLD_KEY_HEADER) if record.headers else None
        new_key = header_key(record, NEW_KEY_HEADER) if record.headers else None
        route = keys.route(record.key, record.header(NEW_KEY_HEADER)) if new_key else None
        envelope = _Row(record.value, root, row)
        if row is None:  # a tombstone: the row is gone
            return ChangeEvent(
                Op.DELETE, None, None, (), (), frozenset(), None, old_key, new_key, route, envelope
            )
        op = _op(row)
        image = columns(row)
        pos = _position(row)
        if op is Op.DELETE:
            # the SMT's rewritten delete is Debezium's `before`: key-only under the default
            # replica identity, so the core puts the whole last row in its place
            return ChangeEvent(
                op,
                image,
                None,
                missing(image),
                (),
                keys.columns(record.key),
                pos,
                old_key,
                new_key,
                route,
                envelope,
            )
        return ChangeEvent(
            op, None, image, (), missing(image), frozenset(), pos, old_key, new_key, route, envelope
        )

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes | None:
        envelope: _Row = event.envelope
        if envelope.row is None or not patch:
            return envelope.raw
        assert envelope.root is not None
        return exact.dumps(self.render(event, patch))

    @staticmethod
    def render(event: ChangeEvent, patch: Patch) -> dict[str, Any] | None:
        """The decoded value with the patch rendered in its row (None for a tombstone)."""
        envelope: _Row = event.envelope
        row = envelope.row
        if row is None:
            return None
        if event.op is Op.DELETE:
            filled = patch.whole_before if patch.whole_before is not None else patch.before
        else:
            filled = patch.after
        if filled:
            _fill(row, filled)
        return envelope.root


def require_key(raw: bytes | None, read: Callable[[bytes], str]) -> str:
    if raw is None:
        raise InvalidKey("a flattened row without a Kafka key: its row cannot be told")
    return read(raw)


def _fill(row: dict[str, Any], filled: Mapping[str, Any]) -> None:
    """Set the filled columns the row has. A rewritten delete names every column the table has
    now (key-only: the others null), so a stored column it lacks was dropped: not written."""
    for column, value in filled.items():
        if column in row:
            row[column] = value


def _op(row: Mapping[str, Any]) -> Op:
    deleted = row.get(DELETED)
    if deleted is True or deleted == "true":
        return Op.DELETE
    raw_op = row.get("__op")
    if raw_op is None:
        return Op.UPDATE
    op = OPS.get(raw_op) if type(raw_op) is str else None
    if op is None:
        raise BadInput(f"unknown __op {raw_op!r}")
    return op


def _position(row: Mapping[str, Any]) -> tuple[int, ...] | None:
    for field, as_source in _POSITION_FIELDS:
        value = row.get(field)
        if value is not None:
            return position({as_source: value})
    return None


def _no_missing(_image: dict[str, Any]) -> tuple[str, ...]:
    return ()


def _row_fields(schema: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]] | None:
    if schema is None:
        return None
    found = schema.get("fields")
    if not isinstance(found, list):
        raise BadInput("schema of the row has no field list")
    return {f["field"]: f for f in found if isinstance(f, dict) and "field" in f}


__all__ = ["FlatCodec", "columns", "is_flat"]
