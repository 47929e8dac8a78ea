"""A dead letter read back (hydrator/dlq/letters.py): the record it holds, exactly as it came,
at its own topic, partition and offset; the error's kind; the records of the dead-letter topic
no replay can take."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydrator.core.hydrator import Hydrator, read_handoff
from hydrator.core.records import HEADER_ERROR, HEADER_SOURCE, DeadLetter, OutputRecord
from hydrator.dlq.letters import Letter, Unreplayable, error_kind, read_letter
from hydrator.events import RawRecord
from hydrator.formats import codec_for
from hydrator.kafka.record_limits import HEADER_TRUNCATED
from hydrator.topology.emit import HEADER_SOURCE_ORIGINAL, leaving

APP = "orders-app"
DLQ = f"{APP}-dlq"


def as_read(
    record: OutputRecord, offset: int = 7, timestamp_ms: int = 1_700_000_000_000
) -> RawRecord:
    """`record`, written to the dead-letter topic, as a replay reads it back."""
    return RawRecord(
        DLQ, record.partition, offset, record.key, record.value, record.headers, timestamp_ms
    )


def dead(record: RawRecord, reason: str = "debezium: BadInput: not JSON") -> RawRecord:
    return as_read(leaving(DeadLetter(record, reason).to_output()))


_TOPICS = st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True).filter(
    lambda t: not t.startswith(APP)
)
_HEADERS = st.lists(
    st.tuples(
        st.from_regex(r"[a-z][a-z._]{0,20}", fullmatch=True).filter(
            lambda n: not n.startswith("hydrator.")
        ),
        st.one_of(st.none(), st.binary(max_size=20)),
    ),
    max_size=4,
).map(tuple)


@given(
    topic=_TOPICS,
    partition=st.integers(0, 7),
    offset=st.integers(0, 2**62),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    value=st.one_of(st.none(), st.binary(max_size=200)),
    headers=_HEADERS,
    reason=st.text(max_size=80),
)
def test_a_dead_letter_reads_back_as_the_record_it_holds(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
    reason: str,
) -> None:
    original = RawRecord(topic, partition, offset, key, value, headers, 5)
    letter = read_letter(dead(original, reason), APP, partitions=8)
    assert isinstance(letter, Letter), letter
    back = letter.original
    assert (back.topic, back.partition, back.offset) == (topic, partition, offset)
    assert (back.key, back.value, back.headers) == (key, value, headers)
    assert back.source == original.source
    assert letter.error == reason.encode("utf-8", "backslashreplace").decode()
    assert letter.dead_lettered_ms == 1_700_000_000_000


def test_a_record_that_came_with_hydrator_headers_keeps_its_older_source() -> None:
    """An input that was itself a dead letter copied back by hand: it left with one of each
    engine header, the older source kept as hydrator.source.original, which stays."""
    original = RawRecord(
        "orders",
        1,
        40,
        b"k",
        b"v",
        ((HEADER_SOURCE, b"orders:1:3"), (HEADER_ERROR, b"old reason"), ("trace", b"t")),
    )
    letter = read_letter(dead(original), APP, partitions=2)
    assert isinstance(letter, Letter)
    assert letter.original.source == "orders:1:40"
    assert letter.original.headers == ((HEADER_SOURCE_ORIGINAL, b"orders:1:3"), ("trace", b"t"))


def test_what_a_failed_record_becomes_in_the_core_reads_back_as_that_record() -> None:
    hydrator = Hydrator(codec_for("cockroachdb"))
    original = RawRecord("orders", 0, 12, b'{"id": 1}', b'{"op": "c", "after": {"id": 1}}')
    route = hydrator.route(original)
    assert isinstance(route, DeadLetter)
    letter = read_letter(as_read(leaving(route.to_output())), APP, partitions=1)
    assert isinstance(letter, Letter)
    assert letter.original.source == "orders:0:12"
    assert letter.kind == "cockroachdb: InvalidKey"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("cockroachdb: InvalidKey: key is a JSON object, not the array", "cockroachdb: InvalidKey"),
        ("auto (debezium): BadInput: missing op", "auto (debezium): BadInput"),
        (
            "auto (tried cassandra, debezium, cockroachdb, ydb): BadInput: no format takes it",
            "auto (tried cassandra, debezium, cockroachdb, ydb): BadInput",
        ),
        ("unresolved columns: doc, body", "unresolved columns"),
        ("unreadable handoff: ValueError: truncated", "unreadable handoff: ValueError"),
        ("value is 2000000 bytes, over the 1048576-byte limit", "value is"),
        ("parked records of this key over the limit: 1000 wait already", "parked records of "
         "this key over the limit"),
        ("something", "something"),
    ],
)  # fmt: skip
def test_the_kind_of_an_error_is_a_beginning_of_it(reason: str, kind: str) -> None:
    assert error_kind(reason) == kind
    assert reason.startswith(kind)


def _unreplayable(record: RawRecord) -> Unreplayable:
    letter = read_letter(record, APP, partitions=2)
    assert isinstance(letter, Unreplayable), letter
    return letter


def test_the_state_of_a_key_too_large_for_the_changelog_is_no_record() -> None:
    headers = (
        (HEADER_ERROR, b"the state of key ... is 9 bytes, over"),
        (HEADER_SOURCE, b"t:state"),
    )
    found = _unreplayable(as_read(OutputRecord(0, b'{"id":1}', None, headers)))
    assert found.topic == "t" and "state" in found.why


def test_a_handoff_that_could_not_be_read_is_no_input() -> None:
    handoff = RawRecord(f"{APP}-handoff", 1, 3, b"k", b"\xff garbage")
    letter = read_handoff(handoff)
    assert isinstance(letter, DeadLetter)
    assert "internal topic" in _unreplayable(as_read(letter.to_output())).why


def test_a_handoff_that_could_not_be_applied_is_no_input() -> None:
    # hydrator/core/hydrator.py: a handoff as a dead letter names offset -1
    record = RawRecord("orders", 0, -1, b"k", b"handoff bytes")
    assert "handoff" in _unreplayable(dead(record, "KeyError: x")).why


def test_an_output_too_large_for_its_topic_is_not_replayed() -> None:
    reason = "record for orders.out is 9000000 bytes, over the topic's 1048576-byte limit (m)"
    headers = ((HEADER_SOURCE, b"orders:0:5"), (HEADER_ERROR, reason.encode()))
    found = _unreplayable(as_read(OutputRecord(0, b"k", b"{}", headers)))
    assert "hydrated already" in found.why and found.kind == "record for orders.out is"


def test_a_dead_letter_cut_to_fit_is_not_replayed() -> None:
    record = dead(RawRecord("orders", 1, 5, b"k", b"{"))
    cut = RawRecord(DLQ, 1, 9, b"k", b"{", (*record.headers, (HEADER_TRUNCATED, b"value=9")))
    assert "not whole" in _unreplayable(cut).why


@pytest.mark.parametrize("source", [None, b"orders", b"orders:x:1", b"orders:5:1"])
def test_a_source_that_names_no_record_of_the_input(source: bytes | None) -> None:
    headers = ((HEADER_ERROR, b"BadInput: x"),) + (
        ((HEADER_SOURCE, source),) if source is not None else ()
    )
    _unreplayable(RawRecord(DLQ, 0, 1, b"k", b"v", headers))
