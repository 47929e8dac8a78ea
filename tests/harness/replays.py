"""Dead letters replayed into the input: a record that already carries the `hydrator.*` headers
an earlier run wrote leaves with one of each, the engine's, and its old source kept as
`hydrator.source.original` (hydrator/topology/emit.py)."""

from __future__ import annotations

from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE
from hydrator.topology.emit import HEADER_SOURCE_ORIGINAL
from tests.harness.topics import Consumed


def names(record: Consumed) -> list[str]:
    return [name for name, _ in record.headers]


def check_replayed(record: Consumed, source: str, old_source: bytes, dead: bool) -> None:
    """`record` (an output, or a dead letter when `dead`) made of a replayed dead letter whose
    hydrator.source was `old_source`, read at `source` (topic:partition:offset)."""
    assert names(record).count(HEADER_SOURCE) == 1, record.headers
    assert record.header(HEADER_SOURCE) == source.encode()
    assert names(record).count(HEADER_SOURCE_ORIGINAL) == 1, record.headers
    assert record.header(HEADER_SOURCE_ORIGINAL) == old_source
    if dead:
        assert names(record).count(HEADER_ERROR) == 1, record.headers
