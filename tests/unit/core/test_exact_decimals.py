"""Decimal digits survive: JSON read with `decimals`, written back, and kept in state."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydrator import exact
from state.codec import FORMAT_V2, decode_state, encode_state
from state.handoff import Handoff
from state.record import StateRecord

# Spellings CockroachDB's decimals take (General Decimal Arithmetic scientific strings).
SPELLINGS = ["1.10", "0.000001", "1E-7", "1.23E+5", "1E+2", "-0.0", "0E-10", "-12345.6789"]
LONG = "123456789012345678901234567890.123456789012345678901234567890"


@pytest.mark.parametrize("number", [*SPELLINGS, LONG])
def test_a_decimal_is_written_back_as_it_was_read(number: str) -> None:
    raw = b'{"price":%s,"n":[%s]}' % (number.encode(), number.encode())
    document = exact.loads(raw, decimals=True)
    assert type(document["price"]) is Decimal and str(document["price"]) == number
    assert exact.dumps(document) == raw


def test_without_decimals_a_fraction_is_a_double() -> None:
    assert exact.loads(b"[1.10]") == [1.1]
    assert type(exact.loads(b"[1.10]")[0]) is float


def test_integers_stay_integers_beside_decimals() -> None:
    wide = 123456789012345678901234567890
    raw = b'{"a":%d,"b":1.50,"c":9223372036854775807,"d":{"e":[-1,2.0]}}' % wide
    document = exact.loads(raw, decimals=True)
    assert document["a"] == wide and type(document["c"]) is int
    assert exact.dumps(document) == raw
    assert exact.dumps(document, sort_keys=True) == raw


def test_a_number_beyond_a_double_is_not_read() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        exact.loads(b"[1E+400]", decimals=True)


def test_nan_decimal_is_not_written() -> None:
    with pytest.raises(exact.ExactJSONError):
        exact.dumps([Decimal("NaN")])


def test_state_and_handoffs_keep_decimal_digits() -> None:
    image = {"price": Decimal("1.10"), "big": 2**70, "tiny": Decimal("1E-30")}
    data = encode_state(StateRecord(image=image, pos=(1, 2)))
    assert data[0] == FORMAT_V2
    restored = decode_state(data).image
    assert restored is not None
    assert {c: str(v) for c, v in restored.items()} == {c: str(v) for c, v in image.items()}
    handoff = Handoff("t", "[2]", "[1]", image, (1, 2), "t:0:1")
    assert str(Handoff.decode(handoff.encode()).image["price"]) == "1.10"  # type: ignore[index]


def test_plain_state_keeps_the_first_format() -> None:
    assert encode_state(StateRecord(image={"price": 1.5}))[0] != FORMAT_V2


decimals = st.decimals(allow_nan=False, allow_infinity=False).filter(
    # beyond a double's range orjson rejects the text; `-0` is JSON's integer zero
    lambda d: abs(d.adjusted()) < 300 and str(d) != "-0"
)


@given(st.lists(decimals | st.integers(), max_size=6))
def test_any_decimal_round_trips_through_json_and_msgpack(numbers: list) -> None:
    text = b"[" + b",".join(str(n).encode() for n in numbers) + b"]"
    document = exact.loads(text, decimals=True)
    assert exact.dumps(document) == text
    packed, _ = exact.pack(document)
    assert [str(n) for n in exact.unpack(packed)] == [str(n) for n in numbers]
