"""Size checks before producing: what fits goes as it is, an oversize record becomes a dead letter,
and a dead letter always fits its topic (truncated and marked)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hydrator.kafka.record_limits import (
    HEADER_ERROR,
    HEADER_TRUNCATED,
    PRODUCER_MAX_BYTES,
    RecordLimits,
    TopicLimits,
    record_bytes,
)

MB = 1024 * 1024
LIMITS = RecordLimits("app-dlq", {"out": 2 * MB, "app-dlq": 1 * MB}, 4 * MB)


def header(headers: list[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    return dict(headers or ()).get(name)


def test_created_topics_leave_room_for_filled_images() -> None:
    limits = TopicLimits.for_max_record_bytes(16 * MB)
    # a hydrated output carries a full `after` and `before`; the changelog an image and parked
    assert limits.output >= 2 * 16 * MB
    assert limits.changelog >= 3 * 16 * MB
    assert limits.dlq >= 16 * MB
    assert limits.producer == max(limits.output, limits.handoff, limits.changelog, limits.dlq)
    assert TopicLimits.for_max_record_bytes(10**10).producer == PRODUCER_MAX_BYTES


def test_a_record_that_fits_goes_unchanged() -> None:
    value = b"v" * 1000
    produced = LIMITS.check("out", b"k", value, [("h", b"1")])
    assert (produced.topic, produced.key, produced.value) == ("out", b"k", value)
    assert produced.headers == [("h", b"1")]
    assert not produced.dead


def test_an_output_over_its_topic_limit_is_a_dead_letter_with_the_reason() -> None:
    value = b"v" * (3 * MB)
    produced = LIMITS.check("out", b"key", value, [("hydrator.source", b"t:0:5")])
    assert produced.dead and produced.topic == "app-dlq"
    assert produced.key == b"key"
    reason = header(produced.headers, HEADER_ERROR).decode()
    assert "out" in reason and str(2 * MB) in reason
    assert header(produced.headers, "hydrator.source") == b"t:0:5"
    # ... and the dead letter itself fits the (smaller) dead-letter topic
    assert record_bytes(produced.key, produced.value, produced.headers) <= MB
    assert header(produced.headers, HEADER_TRUNCATED) == f"value={3 * MB}".encode()
    assert value.startswith(produced.value)


def test_a_topic_without_a_known_limit_takes_the_producer_limit() -> None:
    assert LIMITS.limit("elsewhere") == 4 * MB
    assert RecordLimits("d", {"big": 10 * MB}, 4 * MB).limit("big") == 4 * MB


def test_a_dead_letter_too_large_keeps_key_and_headers() -> None:
    headers = [("trace", b"abc"), (HEADER_ERROR, b"value is 70 MB")]
    produced = LIMITS.check("app-dlq", b"the-key", b"x" * (70 * MB), headers)
    assert produced.topic == "app-dlq" and not produced.dead
    assert produced.key == b"the-key"
    assert produced.headers[:2] == headers
    assert header(produced.headers, HEADER_TRUNCATED) == f"value={70 * MB}".encode()
    assert record_bytes(produced.key, produced.value, produced.headers) <= MB


@given(
    key=st.binary(max_size=3000),
    value=st.binary(max_size=5000),
    headers=st.lists(
        st.tuples(st.text(max_size=30), st.one_of(st.none(), st.binary(max_size=500))),
        max_size=8,
    ),
    limit=st.integers(min_value=1200, max_value=6000),
)
def test_a_dead_letter_always_fits(
    key: bytes, value: bytes, headers: list[tuple[str, bytes | None]], limit: int
) -> None:
    limits = RecordLimits("dlq", {"dlq": limit, "out": limit}, 10 * MB)
    for topic in ("out", "dlq"):
        produced = limits.check(topic, key, value, headers)
        assert record_bytes(produced.key, produced.value, produced.headers) <= limit
        if produced.topic == topic and not produced.dead:
            assert produced.value == value and produced.key == key
        else:
            assert produced.topic == "dlq"
