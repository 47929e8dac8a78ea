"""Which columns an event changed (header `hydrator.changed`), for sinks that write only those.

A partial-update sink (`UPDATE t SET <changed columns> ...`) needs the columns whose value
differs from the row it last wrote. The event cannot say: a placeholder says "unchanged", but an
update that writes a column with its old value ships it as if changed, and patch streams ship
only some columns. The state can: the changed columns are those whose value in the new image
differs from the previous full image.

* A create or snapshot read: every column of the new image (the row starts there, whatever the
  state held before).
* A delete: none (the header is there, empty).
* An update: the columns of the new image whose value differs from the previous image (the
  stored row, or the handoff's on a key change); with none stored, the event's own `before` when
  it is a full one (REPLICA IDENTITY FULL); with neither, every column of the new image, since
  nothing says which stayed.
* A column whose value is unknown (unresolved) is never listed: no value can be written for it.

Pure: nothing here reads a large value out of line (a value stored as a reference is compared
with the value when that is in memory already, else by digest).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from hydrator import exact
from hydrator.events import ChangeEvent, Image, Op, Patch
from state.large import NOT_AT_HAND, LargeValue, LargeValueReader, LazyImage, digest_of

HEADER_CHANGED = "hydrator.changed"
_PLAIN: Final = frozenset({str, int, bool, float, type(None)})
_ABSENT: Final[Any] = object()


def changed_columns(
    event: ChangeEvent, patch: Patch, unresolved: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The columns `event` changed, in the new image's column order (see the module doc)."""
    new = patch.new_image
    if event.op is Op.DELETE or new is None:
        return ()
    skip = unresolved  # usually empty
    if event.op in (Op.CREATE, Op.READ):
        return tuple(column for column in new if column not in skip)
    previous = patch.old_image if patch.old_image is not None else _full_before(event, patch)
    if previous is None:
        return tuple(column for column in new if column not in skip)
    # Columns copied from `previous` are equal by construction: never compared (nor read).
    filled = patch.after if patch.old_image is not None else {}
    if type(previous) is LazyImage:
        cells, reader = previous.cells, previous.reader
    else:
        cells, reader = _as_dict(previous), None
    plain = _PLAIN
    changed = []
    for column, value in _as_dict(new).items():  # the common cases inline: runs for every event
        if column in skip or (column in filled and column in cells):
            continue
        old = cells.get(column, _ABSENT)
        if old is value:
            continue
        kind = type(value)
        if kind is type(old) and kind in plain and old == value:
            continue
        if old is _ABSENT or not _same_cell(old, value, reader):
            changed.append(column)
    return tuple(changed)


def _as_dict(image: Image) -> dict[str, Any]:
    """`image` typed as the dict it nearly always is (compiled, a dict's loop and `get` are C
    calls; a Mapping's are method calls)."""
    return image if type(image) is dict else dict(image)


def changed_header(columns: tuple[str, ...]) -> tuple[str, bytes]:
    """The output header for `columns` (comma-separated, like `hydrator.filled`; empty when the
    event changed nothing)."""
    return (HEADER_CHANGED, ",".join(columns).encode())


def _full_before(event: ChangeEvent, patch: Patch) -> Image | None:
    """The event's `before` as the previous image, when it is a whole row: filled, not null, not
    key-only (a key-only `before` says nothing about the other columns)."""
    if patch.whole_before is not None:
        return patch.whole_before
    before = event.before
    if before is None or event.key_columns.issuperset(
        column for column, value in before.items() if value is not None
    ):
        return None
    if any(column not in patch.before for column in event.missing_before):
        return None  # a placeholder in it that nothing filled: not a known value
    return {**before, **patch.before}


def _same_cell(stored: Any, value: Any, reader: LargeValueReader | None) -> bool:
    if type(stored) is LargeValue:
        # A TOASTed text in memory already compares for less than its digest costs. (Only
        # text: a digest tells key order in an object apart, as same_value does not.)
        known = reader.peek(stored) if reader is not None else NOT_AT_HAND
        if type(known) is str:
            return type(value) is str and known == value
        return _same_large(stored, value)
    return same_value(stored, value)


def _same_large(ref: LargeValue, value: Any) -> bool:
    """Whether `value` is the one `ref` names: by its packed bytes' digest (what the store
    names it by), without reading the stored value."""
    packed, _ = exact.pack(value)
    return len(packed) == ref.size and digest_of(packed) == ref.digest


def same_value(a: Any, b: Any) -> bool:
    """Equal as the sink sees them: same JSON type and value (1 is not true, 1.0 is not 1.00)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _PLAIN:
        return bool(a == b)
    if kind is Decimal:
        return bool(a.as_tuple() == b.as_tuple())
    if kind is list:
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return bool(a == b)
