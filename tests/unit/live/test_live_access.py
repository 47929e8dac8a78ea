"""The live view's origin and token rules, without a server."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hydrator.live.access import Access, access


def test_own_origin_by_loopback_name_or_ip_literal_is_admitted() -> None:
    rule = Access()
    assert rule.origin_ok("http://localhost:8080", "localhost:8080")
    assert rule.origin_ok("http://127.0.0.1:8080", "127.0.0.1:8080")
    assert rule.origin_ok("http://[::1]:8080", "[::1]:8080")
    assert rule.origin_ok("http://192.0.2.7:8080", "192.0.2.7:8080")


def test_other_origins_and_rebound_names_are_refused() -> None:
    rule = Access()
    assert not rule.origin_ok("http://evil.example", "localhost:8080")
    assert not rule.origin_ok("http://evil.example:8080", "evil.example:8080")
    assert not rule.origin_ok("http://localhost:9999", "localhost:8080")
    assert not rule.origin_ok("null", "localhost:8080")
    assert not rule.origin_ok("http://localhost:8080", None)


def test_named_origins_are_admitted_whatever_the_host() -> None:
    rule = access(("https://Dash.example/",), None)
    assert rule.origin_ok("https://dash.example", "hydrator.internal:8080")
    assert not rule.origin_ok("https://dash.example.evil", "hydrator.internal:8080")


def test_no_origin_is_not_a_browser() -> None:
    assert Access().origin_ok(None, "anything")


@given(st.text(max_size=20), st.text(max_size=20))
def test_a_token_admits_exactly_itself(token: str, given_token: str) -> None:
    rule = access((), token)
    if not token:
        assert rule.token_ok(given_token)
    else:
        assert rule.token_ok(given_token) == (given_token == token)
        assert not rule.token_ok(None)
