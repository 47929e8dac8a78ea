"""`hydrator state bootstrap` usage errors: exit 2 with a message naming the option, before any
client is made."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hydrator.cli import cli

BASE = ["state", "bootstrap", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "t"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--from-postgres"),
        (["--from-postgres", "dbname=x", "--from-topic", "e"], "one of"),
        (["--from-postgres", "dbname=x"], "--table"),
        (["--from-topic", "e", "--engine", "flink"], "--engine"),
        (["--from-topic", "e", "--application-id", "a b"], "--application-id"),
    ],
)
def test_usage_errors_exit_2(extra: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, [*BASE, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_it_is_a_state_command() -> None:
    result = CliRunner().invoke(cli, ["state", "--help"])
    assert result.exit_code == 0 and "bootstrap" in result.output


def test_no_broker_is_one_clear_error() -> None:
    """Nothing answers at --bootstrap-servers: exit 75 (as `run`) once --startup-timeout has
    passed, with a message naming the servers, the wait and the last error (it was an empty
    `TimeoutError:` after 30 s of connection chatter)."""
    args = [*BASE, "--from-topic", "e", "--startup-timeout", "2s"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 75, result.output
    assert "no broker answered at --bootstrap-servers 127.0.0.1:1 within 2 s" in result.output
    assert "(--startup-timeout); last error:" in result.output
