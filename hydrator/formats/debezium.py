"""Debezium JSON change events, bare or in a Kafka Connect `{"schema", "payload"}` envelope."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Final, Protocol

import orjson

from hydrator import exact
from hydrator.events import (
    Absent,
    BadInput,
    ChangeEvent,
    InvalidKey,
    Op,
    Passthrough,
    Patch,
    Position,
    RawRecord,
    Read,
)
from hydrator.formats import values
from hydrator.formats.keys import CACHED_KEY_BYTES, canonical, canonical_key, key_document
from hydrator.formats.placeholders import PlaceholderForms

OLD_KEY_HEADER = "__debezium.oldkey"
NEW_KEY_HEADER = "__debezium.newkey"
PASSTHROUGH_OPS = {"t": "truncate event", "m": "logical decoding message"}
OPS: Final = {op.value: op for op in Op}
_ABSENT: Final = object()
_NO_COLUMNS: Final[frozenset[str]] = frozenset()

FieldSchemas = Mapping[str, Mapping[str, Any]]
# The columns of an image (`before`/`after`, by name) that hold the placeholder.
MissingColumns = Callable[[dict[str, Any] | None, str], tuple[str, ...]]


class _Envelope:
    """What encode() needs: the value's bytes, its root document and its payload."""

    __slots__ = ("payload", "raw", "root")

    def __init__(self, raw: bytes, root: dict[str, Any], payload: dict[str, Any]) -> None:
        self.raw = raw
        self.root = root
        self.payload = payload


def parse_json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        document = exact.loads(raw)
    except (orjson.JSONDecodeError, exact.ExactJSONError) as exc:
        raise BadInput(f"{what} is not JSON: {exc}") from None
    return values.as_object(document, what)


def unwrap(root: dict[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """(payload, schema) of a value with or without the schema envelope."""
    if "payload" in root and "schema" in root:
        payload, schema = root["payload"], root["schema"]
        if not isinstance(payload, dict):
            raise BadInput("schema envelope whose payload is not an object")
        if not isinstance(schema, dict):
            raise BadInput("schema envelope whose schema is not an object")
        return payload, schema
    return root, None


def image_fields(schema: Mapping[str, Any] | None, image: str) -> FieldSchemas | None:
    """The column schemas of `before`/`after` from an envelope schema (None when schemaless)."""
    if schema is None:
        return None
    for field in schema.get("fields") or ():
        if isinstance(field, dict) and field.get("field") == image:
            columns = field.get("fields")
            if not isinstance(columns, list):
                raise BadInput(f"schema of {image!r} has no field list")
            return {c["field"]: c for c in columns if isinstance(c, dict) and "field" in c}
    raise BadInput(f"schema has no {image!r} field")


def position(source: Any) -> Position | None:
    """The ordering position of an event (the stale-event rule), None when the connector gives
    none. Its parts must fit the 64 bits state keeps them in."""
    if not isinstance(source, dict):
        return None
    try:
        found = _position(source)
    except (ValueError, TypeError, OverflowError) as exc:  # JSON errors are ValueErrors
        raise BadInput(f"source position is malformed: {exc}") from None
    if found is not None:
        for part in found:  # a loop, not all(...): this runs for every event
            if not exact.MIN_PACKED_INT <= part <= exact.MAX_PACKED_INT:
                raise BadInput(f"source position out of range (64 bits): {found}")
    return found


def _position(source: dict[str, Any]) -> Position | None:
    sequence = source.get("sequence")
    if isinstance(sequence, str):
        return _sequence(sequence)
    if source.get("connector") == "mysql" and source.get("file"):
        file_number = int(str(source["file"]).rsplit(".", 1)[-1])
        return (file_number, int(source.get("pos") or 0), int(source.get("row") or 0))
    if source.get("lsn") is not None:
        return (int(source["lsn"]),)
    return None


def _sequence(sequence: str) -> Position:
    """Postgres' `source.sequence`, `["<last commit LSN>","<LSN>"]` (either may be null). The
    form Debezium writes, two decimal strings, is read without a JSON parser: this runs for
    every event."""
    if sequence.startswith('["') and sequence.endswith('"]') and sequence.isascii():
        first, comma, second = sequence[2:-2].partition('","')
        if comma and first.isdigit() and second.isdigit():
            return (int(first), int(second))
    # other names than above: compiled, a name keeps the type it is first given (str there)
    last_commit, lsn = exact.loads(sequence)
    return (int(last_commit or 0), int(lsn or 0))


def transaction_id(source: Any) -> int | None:
    """`source.txId` (Postgres: the 32-bit xid), None when absent or not an integer."""
    if not isinstance(source, dict):
        return None
    tx = source.get("txId")
    return tx if type(tx) is int and tx >= 0 else None


class DebeziumCodec:
    name = "debezium"
    key_in_record_key = True

    def __init__(self, forms: PlaceholderForms, fill_absent: bool = False) -> None:
        self.forms = forms
        # a patch stream ships only the columns a change wrote (docs/formats.md)
        self.absent = Absent.MISSING if fill_absent else Absent.DROPPED

    def key(self, read: Read) -> str | None:
        """The Kafka key, canonical (its `payload` when in a schema envelope); a null key has
        no state."""
        raw_key = read.record.key
        return None if raw_key is None else canonical_key(raw_key)

    def accepts(self, document: Any) -> bool:
        if not isinstance(document, dict):
            return False
        payload = document.get("payload", document) if "schema" in document else document
        return isinstance(payload, dict) and "op" in payload

    def decode(self, read: Read) -> ChangeEvent | Passthrough:
        record = read.record
        if record.value is None:
            return Passthrough("kafka tombstone")
        root = values.document_object(read)  # read once, also under --format auto
        payload, schema = unwrap(root)
        return self.decode_document(
            record, root, payload, lambda image, name: self._missing(image, schema, name)
        )

    def decode_document(
        self,
        record: RawRecord,
        root: dict[str, Any],
        payload: dict[str, Any],
        missing: MissingColumns,
        keys: KeyReader | None = None,
    ) -> ChangeEvent | Passthrough:
        """The change event of a decoded value (JSON here, Avro in hydrator.formats.avro):
        `payload` holds `op`/`before`/`after`/`source`, `missing(image, name)` names the
        columns of `before`/`after` that hold the placeholder, `keys` reads the Kafka key
        (JSON when None)."""
        keys = keys or JSON_KEYS
        raw_op = payload.get("op", _ABSENT)
        op = OPS.get(raw_op) if type(raw_op) is str else None
        if op is None:
            if raw_op is _ABSENT:
                raise BadInput("not a Debezium change event: no 'op' field")
            if type(raw_op) is str and raw_op in PASSTHROUGH_OPS:
                return Passthrough(PASSTHROUGH_OPS[raw_op])
            raise BadInput(f"unknown op {raw_op!r}")
        before = self._image(payload, "before")
        after = self._image(payload, "after")
        if op is not Op.DELETE and after is None:
            raise BadInput(f"op {raw_op!r} without an 'after' image")
        if op is Op.DELETE and before is None and after is not None:
            raise BadInput("op 'd' with an 'after' image")
        if record.headers:
            old_key = header_key(record, OLD_KEY_HEADER)
            new_key = header_key(record, NEW_KEY_HEADER)
        else:
            old_key = new_key = None
        return ChangeEvent(  # positional, in field order: keywords cost twice as much
            op,
            before,
            after,
            missing(before, "before"),
            missing(after, "after"),
            keys.columns(record.key) if before else _NO_COLUMNS,
            position(payload.get("source")),
            old_key,
            new_key,
            keys.route(record.key, record.header(NEW_KEY_HEADER)) if new_key else None,
            _Envelope(record.value or b"", root, payload),
            self.absent,
            None,
            transaction_id(payload.get("source")),
        )

    def encode(self, event: ChangeEvent, patch: Patch) -> bytes:
        envelope: _Envelope = event.envelope
        if not patch:
            return envelope.raw
        return exact.dumps(self.render(event, patch))

    @staticmethod
    def render(event: ChangeEvent, patch: Patch) -> dict[str, Any]:
        """The decoded value with `patch` rendered in it (its root document)."""
        envelope: _Envelope = event.envelope
        payload = envelope.payload
        if patch.after:
            payload["after"].update(patch.after)
        if patch.whole_before is not None:
            payload["before"] = dict(patch.whole_before)
        elif patch.before:
            payload["before"].update(patch.before)
        return envelope.root

    @staticmethod
    def _image(payload: dict[str, Any], name: str) -> dict[str, Any] | None:
        image = payload.get(name)
        if image is not None and not isinstance(image, dict):
            raise BadInput(f"'{name}' is a JSON {type(image).__name__}, not an object")
        return image

    def _missing(
        self, image: dict[str, Any] | None, schema: Mapping[str, Any] | None, name: str
    ) -> tuple[str, ...]:
        """The columns of `image` (the payload's `name`) that hold the placeholder."""
        if schema is None:
            return self.forms.shaped_columns(image) if image else ()
        fields = image_fields(schema, name)  # checked even for a null image: a bad schema is bad
        if not image or fields is None:
            return ()
        exact = self.forms.matches_schema
        return tuple(
            c
            for c, v in image.items()
            if v is not None and (f := fields.get(c)) is not None and exact(v, f)
        )


def header_key(record: RawRecord, header: str) -> str | None:
    """The canonical key in a `__debezium.oldkey/newkey` header (None when absent)."""
    raw = record.header(header)
    if raw is None:
        return None
    try:
        return canonical_key(raw)
    except InvalidKey as exc:
        raise BadInput(f"header {header}: {exc}") from None


class KeyReader(Protocol):
    """How a codec reads the Kafka key's columns, and rebuilds a new key's bytes for a key
    change's handoff, in the key's own serialization."""

    def columns(self, raw_key: bytes | None) -> frozenset[str]: ...

    def route(self, old_raw_key: bytes | None, new_key_header: bytes | None) -> bytes | None: ...


class _JsonKeys:
    def columns(self, raw_key: bytes | None) -> frozenset[str]:
        return _key_columns(raw_key)

    def route(self, old_raw_key: bytes | None, new_key_header: bytes | None) -> bytes | None:
        return _route_key(old_raw_key, new_key_header)


JSON_KEYS: KeyReader = _JsonKeys()


def _key_columns(raw_key: bytes | None) -> frozenset[str]:
    if raw_key is None:
        return _NO_COLUMNS
    if len(raw_key) > CACHED_KEY_BYTES:
        return _columns_of(raw_key)
    return _short_key_columns(bytes(raw_key))


def _columns_of(raw_key: bytes) -> frozenset[str]:
    document = key_document(raw_key)
    return frozenset(document) if isinstance(document, dict) else _NO_COLUMNS


# CDC traffic keeps coming back to the same rows: their key JSON is not parsed every time
_short_key_columns = lru_cache(maxsize=4096)(_columns_of)


def _route_key(old_raw_key: bytes | None, new_key_header: bytes | None) -> bytes | None:
    """The raw key bytes Kafka Connect would have written for the new key, rebuilt from the old
    key's bytes (same converter, same envelope), so the handoff is partitioned like the input."""
    if old_raw_key is None or new_key_header is None:
        return None
    try:
        new_key = exact.loads(new_key_header)
        old = exact.loads(old_raw_key)
    except ValueError:  # orjson.JSONDecodeError, ExactJSONError
        return None
    if isinstance(new_key, dict) and new_key.keys() == {"schema", "payload"}:
        return new_key_header
    if isinstance(old, dict) and old.keys() == {"schema", "payload"}:
        return exact.dumps({"schema": old["schema"], "payload": new_key})
    return exact.dumps(new_key)


__all__ = [
    "JSON_KEYS",
    "DebeziumCodec",
    "KeyReader",
    "canonical",
    "header_key",
    "position",
]
