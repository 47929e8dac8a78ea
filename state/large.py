"""Large column values kept apart from the row image (after PAX's "toast").

A TOASTed column is usually the biggest part of a row and the part that changes least: most
events leave it alone. So a value whose packed bytes exceed the threshold is kept apart, named
by its content digest (blake2b-128 of the packed bytes), and the image holds a small
`LargeValue` reference in its place. Whether a value changed is a comparison with the value
the stored image holds (the object at hand, else its stored bytes against the new packed
bytes); only a new value is hashed, to name it. An event that leaves a value unchanged writes
the reference again, never the value.

A value is stored as its packed bytes, not compressed one by one: compression belongs where it
runs once per block, off the event's path (RocksDB's block compression for the local store,
state/stores/rocksdb.py; batch compression for the changelog, whose topic keeps zstd batches:
hydrator/topology/layout.py). Compressing each value (zstd, or lz4) is still there, as
`--large-value-compression`, and every layout is read.

Where the compressed bytes live is the engine's choice: the embedded engine keeps each under its
own store key (out of line: the row's record holds only the digest, see `store_key`), Spark
keeps them inside the key's state record (inline), which Spark writes whole on every update
anyway, so what helps there is the compression and not recompressing an unchanged value.

A row image read back with references in it is a `LazyImage`: a read-only mapping that reads a
large value (through a `LargeValueReader`) only when a column is asked for, so an event that
needs no fill and no whole `before` never reads it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import lz4.block
import zstandard

from hydrator import exact
from hydrator.errors import HydratorError
from state import layout
from state.layout import DIGEST_BYTES

DEFAULT_THRESHOLD = 2048
# The first byte of a stored value names its layout, so every layout is read whatever is
# written now: 3 (the default since layout 3 exists) the packed bytes as they are, 1 a zstd
# frame, 2 an lz4 block. Compressing each new value on the event's path cost 35 us per 8 KB of
# text with zstd (13 with lz4); RocksDB compresses the same bytes per block in its background
# threads and the producer per batch in librdkafka's, with no Python on the path.
BLOB_ZSTD = 1
BLOB_LZ4 = 2
BLOB_PACKED = 3
COMPRESSIONS = ("none", "lz4", "zstd")
DEFAULT_COMPRESSION = "none"
_PACKED_BYTE: Final = bytes([BLOB_PACKED])
ZSTD_LEVEL = 1  # higher levels gain a few percent for twice the time
# lz4 cannot shrink anything by more than this, so a block claiming a larger size is damaged
# (and must not make us allocate what it claims).
_LZ4_MAX_RATIO = 256
# Out-of-line values of an owner's row: their keys' layout is state/layout.py's.
STORE_PREFIX = layout.LARGE_VALUE_PREFIX


class LargeValueError(HydratorError, ValueError):
    """A large value that cannot be read: missing from the store, or its bytes are damaged."""


@dataclass(frozen=True, slots=True)
class LargeValue:
    """A reference to a large column value: its digest and packed size, and its compressed bytes
    when they travel with the reference (inline, or not yet stored); None when a store key holds
    them (out of line)."""

    digest: bytes
    size: int
    compressed: bytes | None = None

    def out_of_line(self) -> LargeValue:
        return self if self.compressed is None else LargeValue(self.digest, self.size)


class LargeValueReader(Protocol):
    """How a LazyImage reads its large values."""

    def read(self, ref: LargeValue) -> Any:
        """The value `ref` names; raises LargeValueError when it cannot be read."""
        ...

    def peek(self, ref: LargeValue) -> Any:
        """The value if it is at hand without reading anything, else NOT_AT_HAND."""
        ...

    def holds(self, ref: LargeValue, packed: bytes) -> bool:
        """Whether the value `ref` names packs to `packed`: a comparison of the stored bytes,
        without unpacking them (False when they cannot be read)."""
        ...


NOT_AT_HAND: Any = object()


class InlineReader:
    """Reads references that carry their compressed bytes (Spark's state), each value once."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[bytes, Any] = {}

    def read(self, ref: LargeValue) -> Any:
        value = self._values.get(ref.digest, NOT_AT_HAND)
        if value is NOT_AT_HAND:
            if ref.compressed is None:
                raise LargeValueError(f"large value {ref.digest.hex()} is stored out of line")
            value = self._values[ref.digest] = unpack_value(ref.compressed)
        return value

    def peek(self, ref: LargeValue) -> Any:
        return self._values.get(ref.digest, NOT_AT_HAND)

    def holds(self, ref: LargeValue, packed: bytes) -> bool:
        return ref.compressed is not None and stored_bytes_are(ref.compressed, packed)


class UnreadableValues:
    """For records read where no store is at hand (indexes, the restore's checks): counting
    and copying references works, reading a value says why it cannot."""

    __slots__ = ()

    def read(self, ref: LargeValue) -> Any:
        raise LargeValueError(f"large value {ref.digest.hex()} is stored out of line")

    def peek(self, ref: LargeValue) -> Any:
        return NOT_AT_HAND

    def holds(self, ref: LargeValue, packed: bytes) -> bool:
        return False


class LazyImage(Mapping[str, Any]):
    """A row image whose large values are read when asked for. Columns, their order and `in`
    need no read; `image[column]` reads that column only; copying it (`dict(image)`) reads all.
    Nothing changes one: the rules make new plain dicts."""

    __slots__ = ("cells", "reader")

    def __init__(self, cells: dict[str, Any], reader: LargeValueReader) -> None:
        self.cells = cells  # column -> value, or LargeValue
        self.reader = reader

    def __getitem__(self, column: str) -> Any:
        value = self.cells[column]
        if type(value) is LargeValue:
            return self.reader.read(value)
        return value

    def __contains__(self, column: object) -> bool:
        return column in self.cells

    def __iter__(self) -> Iterator[str]:
        return iter(self.cells)

    def __len__(self) -> int:
        return len(self.cells)

    def __repr__(self) -> str:
        return f"LazyImage({self.cells!r})"

    def refs(self) -> list[LargeValue]:
        return [value for value in self.cells.values() if type(value) is LargeValue]


def has_refs(cells: Mapping[str, Any]) -> bool:
    return any(type(value) is LargeValue for value in cells.values())


def refs_of(image: Mapping[str, Any] | None) -> list[LargeValue]:
    """The references an image holds (none for a plain image)."""
    return image.refs() if type(image) is LazyImage else []


def materialized(image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`image` as a plain dict with every value read (for what leaves the key: a handoff, a
    whole `before`); a plain dict is returned as it is."""
    if image is None or type(image) is dict:
        return image
    if type(image) is LazyImage:  # from its cells: the Mapping protocol costs calls per column
        read = image.reader.read
        return {c: read(v) if type(v) is LargeValue else v for c, v in image.cells.items()}
    return dict(image)


def outline(
    image: Mapping[str, Any],
    threshold: int,
    previous: Mapping[str, Any] | None,
    compression: str = DEFAULT_COMPRESSION,
) -> dict[str, Any]:
    """`image`'s cells for storage: `image` with each value over `threshold` packed bytes in
    a LargeValue (see `large_cells`)."""
    if type(image) is LazyImage:
        return image.cells  # read from the store and not changed since: nothing to redo
    cells = dict(image)
    large = large_cells(image, threshold, previous, compression)
    if large:
        cells.update(large)
    return cells


def large_cells(
    image: Mapping[str, Any],
    threshold: int,
    previous: Mapping[str, Any] | None,
    compression: str = DEFAULT_COMPRESSION,
) -> dict[str, LargeValue] | None:
    """The columns of `image` whose values pack to over `threshold` bytes, each as a LargeValue
    (None when there are none). A value the `previous` stored image held in the same column
    keeps that reference: the same object, an equal value at hand, or, when none is at hand,
    packed bytes equal to the stored ones (compared, never hashed). Any other value is new: it
    is named by its digest (a value another column of `previous` held keeps that reference: its
    bytes are stored already), stored as `compression` says (one of COMPRESSIONS), and its
    reference carries those bytes. Runs for every changed row: a short string is passed over
    on its length alone, without being packed."""
    old_refs: dict[str, LargeValue] = {}
    reader: LargeValueReader | None = None
    if type(previous) is LazyImage:
        reader = previous.reader
        old_refs = {c: v for c, v in previous.cells.items() if type(v) is LargeValue}
    large: dict[str, LargeValue] | None = None
    for column, value in image.items():
        if type(value) is str:
            chars = len(value)
            # UTF-8 takes at most 4 bytes a character, ASCII one; msgpack's header at most 5
            if 4 * chars + 5 <= threshold or (chars + 5 <= threshold and value.isascii()):
                continue
        elif not could_be_large(value, threshold):
            continue
        ref = old_refs.get(column)
        known: Any = NOT_AT_HAND
        if ref is not None and reader is not None:
            known = reader.peek(ref)
            if known is value or (known is not NOT_AT_HAND and known == value):
                if large is None:
                    large = {}
                large[column] = ref
                continue
        packed, _ = exact.pack(value)
        if len(packed) <= threshold:
            continue
        if (
            ref is not None
            and reader is not None
            and known is NOT_AT_HAND
            and ref.size == len(packed)
            and reader.holds(ref, packed)
        ):
            if large is None:
                large = {}
            large[column] = ref
            continue
        digest = digest_of(packed)
        same = next((r for r in old_refs.values() if r.digest == digest), None)
        if large is None:
            large = {}
        large[column] = same or LargeValue(digest, len(packed), compress(packed, compression))
    return large


def could_be_large(value: Any, threshold: int) -> bool:
    """Whether the packed `value` may exceed `threshold` bytes, from its length alone: only
    strings, bytes and containers can, and a string's UTF-8 takes at most 4 bytes a character
    (plus msgpack's header of at most 5)."""
    kind = type(value)
    if kind is str:
        return 4 * len(value) + 5 > threshold
    if kind is bytes:
        return len(value) + 5 > threshold
    if kind is list or kind is dict:
        return len(value) > 0
    return False


# What a number, a null or a container's slot takes beside a string's characters.
CELL_BYTES = 16


def image_bytes(image: Mapping[str, Any] | None) -> int:
    """About the memory a row image's values hold: a string's or bytes' length, a large value's
    packed size (a LazyImage's reference), CELL_BYTES for anything else; containers summed item
    by item. Cheap enough for every event: rows are mostly strings and numbers."""
    if image is None:
        return 0
    cells = image.cells if type(image) is LazyImage else image
    total = 0
    for value in cells.values():
        kind = type(value)
        if kind is str or kind is bytes:
            total += len(value)
        elif kind is LargeValue:
            total += value.size
        elif kind is list or kind is dict:
            total += _container_bytes(value)
        else:
            total += CELL_BYTES
    return total


def added_bytes(image: Mapping[str, Any] | None, committed: Mapping[str, Any] | None) -> int:
    """What `image`'s values hold beyond those of `committed`, the key's committed image (which
    the state cache holds): a value that is the very object `committed` has in its column (a
    column the events left as it was, read from state) adds nothing; the rest count as in
    image_bytes."""
    if committed is None or image is None:
        return image_bytes(image)
    # Typed as the dicts they nearly always are: compiled, `get` and the loop are then direct
    # dict calls rather than method calls (this runs for every event).
    cells: dict[str, Any] = _cells(image)
    old: dict[str, Any]
    reader: LargeValueReader | None = None
    if type(committed) is LazyImage:
        old, reader = committed.cells, committed.reader
    else:
        old = _cells(committed)
    total = 0
    for column, value in cells.items():
        previous = old.get(column)
        if previous is not None and (
            previous is value
            or (
                type(previous) is LargeValue
                and reader is not None
                and reader.peek(previous) is value
            )
        ):
            continue
        if type(value) is LargeValue:
            total += value.size
        else:
            total += _container_bytes(value)
    return total


def _cells(image: Mapping[str, Any]) -> dict[str, Any]:
    if type(image) is LazyImage:
        return image.cells
    return image if type(image) is dict else dict(image)


def _container_bytes(value: Any) -> int:
    kind = type(value)
    if kind is str or kind is bytes:
        return len(value)
    if kind is dict:
        return sum(len(k) + _container_bytes(v) for k, v in value.items())
    if kind is list:
        return sum(map(_container_bytes, value)) + CELL_BYTES
    return CELL_BYTES


def digest_of(packed: bytes) -> bytes:
    return hashlib.blake2b(packed, digest_size=DIGEST_BYTES).digest()


def store_key(owner: bytes, digest: bytes) -> bytes:
    """The store (and changelog) key of a large value of the row stored under `owner`."""
    return layout.large_value_key(owner, digest)


is_store_key = layout.is_large_value_key


def split_store_key(key: bytes) -> tuple[bytes, bytes]:
    """(owner, digest) of a large value's store key."""
    try:
        return layout.split_large_value_key(key)
    except layout.KeyLayoutError as exc:
        raise LargeValueError(str(exc)) from None


# -- the bytes ---------------------------------------------------------------------------------

_local = threading.local()


def compress(packed: bytes, compression: str = DEFAULT_COMPRESSION) -> bytes:
    """A stored large value: its layout's byte, then the packed value as it is ("none"), or
    compressed: an lz4 block (with its size) or a zstd frame."""
    if compression == "none":
        return _PACKED_BYTE + packed
    if compression == "lz4":
        return bytes([BLOB_LZ4]) + lz4.block.compress(packed, store_size=True)
    if compression == "zstd":
        compressor = getattr(_local, "compressor", None)
        if compressor is None:
            compressor = _local.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        return bytes([BLOB_ZSTD]) + compressor.compress(packed)
    raise ValueError(f"unknown compression {compression!r} (one of {', '.join(COMPRESSIONS)})")


def stored_bytes_are(blob: bytes, packed: bytes) -> bool:
    """Whether the stored large value `blob` holds the value packed as `packed`."""
    if blob[:1] == _PACKED_BYTE:
        return len(blob) == len(packed) + 1 and blob.endswith(packed)
    try:
        return _packed_of(blob) == packed
    except LargeValueError:
        return False


def unpack_value(blob: bytes, digest: bytes | None = None) -> Any:
    """The value a stored large value holds; with `digest`, checked against it."""
    packed = _packed_of(blob)
    if digest is not None and digest_of(packed) != digest:
        raise LargeValueError(f"large value {digest.hex()} does not match its digest")
    try:
        return exact.unpack(packed)
    except Exception as exc:
        raise LargeValueError(f"damaged large value: {type(exc).__name__}: {exc}") from None


def _packed_of(blob: bytes) -> bytes:
    """The packed value a stored large value holds, by its layout byte."""
    layout = blob[0] if blob else None
    if layout == BLOB_PACKED:
        return blob[1:]
    if layout == BLOB_LZ4:
        packed = _lz4_unpacked(blob)
    elif layout == BLOB_ZSTD:
        packed = _zstd_unpacked(blob)
    else:
        raise LargeValueError(
            f"unknown large value format {'empty' if layout is None else layout} "
            f"(this release reads {BLOB_ZSTD}, {BLOB_LZ4} and {BLOB_PACKED})"
        )
    return packed


def _lz4_unpacked(blob: bytes) -> bytes:
    claimed = int.from_bytes(blob[1:5], "little")
    if len(blob) < 5 or claimed > _LZ4_MAX_RATIO * len(blob):
        raise LargeValueError("damaged large value: its size header is not an lz4 block's")
    try:
        return lz4.block.decompress(blob[1:])
    except lz4.block.LZ4BlockError as exc:
        raise LargeValueError(f"damaged large value: {exc}") from None


def _zstd_unpacked(blob: bytes) -> bytes:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    try:
        return decompressor.decompress(blob[1:])
    except zstandard.ZstdError as exc:
        raise LargeValueError(f"damaged large value: {exc}") from None
