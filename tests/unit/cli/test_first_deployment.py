"""What a new user's first mistakes meet (issue 43): a --bootstrap-servers name that does not
resolve told apart from an address where nothing answers, within seconds and alike in `run`
and `state bootstrap`; state in the user's state directory, the same for the run and the state
tools; a local store rebuilt with a warning that says why and that nothing is lost; the default
worker count fitted to the input."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from hydrator.cli import cli
from hydrator.config import default_state_dir
from hydrator.engines.embedded.restore import rebuild_reason
from hydrator.errors import exit_code_for
from hydrator.kafka.local_broker import free_port
from hydrator.kafka.reachability import (
    BrokerAddressUnknown,
    BrokerUnavailable,
    diagnose,
    explained,
    servers_of,
    unknown_names_error,
    wait_for_broker,
)

# RFC 2606: a name under .invalid never resolves.
NO_SUCH_HOST = "kafak.invalid"


def _resolver_answers() -> bool:
    try:
        socket.getaddrinfo(NO_SUCH_HOST, 9092)
    except socket.gaierror as exc:
        return exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None))
    return False


needs_dns = pytest.mark.skipif(
    not _resolver_answers(), reason="no resolver answers here that a name does not exist"
)


@pytest.fixture
def listener() -> Iterator[str]:
    """A port that takes TCP connections and says nothing: not a Kafka broker."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        held = []
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
        for conn in held:
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{port}"
    stop.set()
    thread.join()
    server.close()


# -- telling the failures apart ----------------------------------------------------------------


def test_bootstrap_servers_are_read_as_librdkafka_reads_them() -> None:
    assert servers_of("a:9092, SASL_SSL://b.example:9093,[::1]:9094,c") == [
        ("a:9092", "a", 9092),
        ("SASL_SSL://b.example:9093", "b.example", 9093),
        ("[::1]:9094", "::1", 9094),
        ("c", "c", None),
    ]
    with_credentials = "SASL_PLAINTEXT://svc:p@ss:w0rd@broker.example:9092"
    assert servers_of(with_credentials) == [(with_credentials, "broker.example", 9092)]


@needs_dns
def test_a_name_that_does_not_resolve_is_said_so() -> None:
    (server,) = diagnose(f"{NO_SUCH_HOST}:9092")
    assert server.unknown_name
    assert f"the host name {NO_SUCH_HOST} does not resolve" in str(server.problem)
    error = unknown_names_error([server])
    assert isinstance(error, BrokerAddressUnknown)
    assert exit_code_for(error) == 2
    assert str(error).startswith(f"--bootstrap-servers {NO_SUCH_HOST}:9092: the host name")


def test_a_port_where_nothing_listens_is_not_a_name_problem() -> None:
    address = f"127.0.0.1:{free_port()}"
    servers = diagnose(address)
    assert unknown_names_error(servers) is None
    assert explained(servers, "Local: Broker transport failure") == (
        f"{address}: {address} refuses connections: nothing listens on that port"
    )


def test_a_port_that_answers_but_not_as_kafka_says_so(listener: str) -> None:
    servers = diagnose(listener)
    assert [s.problem for s in servers] == [None]
    reason = explained(servers, "Local: Timed out")
    assert reason.startswith("Local: Timed out; the address takes TCP connections")
    assert "security.protocol" in reason


@needs_dns
def test_one_name_that_resolves_is_enough_to_try() -> None:
    servers = diagnose(f"{NO_SUCH_HOST}:9092,127.0.0.1:{free_port()}")
    assert unknown_names_error(servers) is None
    assert f"the host name {NO_SUCH_HOST} does not resolve" in explained(servers, "x")


@needs_dns
def test_at_start_an_unknown_name_ends_the_wait_at_once() -> None:
    began = time.monotonic()
    with pytest.raises(BrokerAddressUnknown):
        wait_for_broker({"bootstrap.servers": f"{NO_SUCH_HOST}:9092"}, 300, lambda: False)
    assert time.monotonic() - began < 5


@needs_dns
def test_after_an_outage_an_unknown_name_is_waited_for() -> None:
    """A broker's name may vanish while it is replaced: a running engine waits it out."""
    with pytest.raises(BrokerUnavailable) as raised:
        wait_for_broker(
            {"bootstrap.servers": f"{NO_SUCH_HOST}:9092"}, 1, lambda: False, at_start=False
        )
    assert f"the host name {NO_SUCH_HOST} does not resolve" in str(raised.value)


# `run` and `state bootstrap`: the same failure, the same wait and the same exit code.
RUN = ["run", "--workers", "1", "--input-topic", "t", "--output-suffix", ".e", "--available-now"]
BOOTSTRAP = ["state", "bootstrap", "--input-topic", "t", "--from-topic", "full"]


@needs_dns
@pytest.mark.parametrize("command", [RUN, BOOTSTRAP], ids=["run", "state bootstrap"])
def test_a_mistyped_broker_name_is_exit_2_within_seconds(
    command: list[str], tmp_path: Path
) -> None:
    args = [*command, "--bootstrap-servers", f"{NO_SUCH_HOST}:9092"]
    began = time.monotonic()
    result = CliRunner().invoke(cli, [*args, "--state-dir", str(tmp_path)])
    assert time.monotonic() - began < 10
    assert result.exit_code == 2, result.output
    assert f"Error: --bootstrap-servers {NO_SUCH_HOST}:9092: the host name" in result.output
    assert "does not resolve" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", [RUN, BOOTSTRAP], ids=["run", "state bootstrap"])
def test_no_broker_in_time_is_exit_75_naming_the_wait(command: list[str], tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    args = [*command, "--bootstrap-servers", nowhere, "--startup-timeout", "2s"]
    result = CliRunner().invoke(cli, [*args, "--state-dir", str(tmp_path)])
    assert result.exit_code == 75, result.output
    assert f"Error: no broker answered at --bootstrap-servers {nowhere} within 2 s" in (
        result.output
    )
    assert "refuses connections: nothing listens on that port" in result.output


def test_run_and_bootstrap_share_the_startup_timeout_default() -> None:
    for command in (["run"], ["state", "bootstrap"]):
        shown = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200).output
        line = next(line for line in shown.splitlines() if "--startup-timeout" in line)
        following = shown[shown.index(line) :][:600]
        assert "[default: 5m]" in following, following


# -- where state lives ---------------------------------------------------------------------------


def test_state_lives_in_the_user_s_state_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "toast-hydrator"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".local" / "state" / "toast-hydrator"


def test_the_run_and_the_state_tools_find_the_same_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("HYDRATOR_STATE_DIR", "HYDRATOR_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    expected = tmp_path / "toast-hydrator"
    args = ["--bootstrap-servers", "b:1", "--input-topic", "t", "--output-suffix", ".e"]
    shown = CliRunner().invoke(cli, ["config", "show", *args])
    assert f'state-dir = "{expected}"' in shown.output, shown.output
    stats = CliRunner().invoke(cli, ["state", "stats"])
    assert stats.exit_code == 2
    assert str(expected / "toast-hydrator") in stats.output, stats.output
    assert not Path("hydrator-state").exists()


# -- a store rebuilt ---------------------------------------------------------------------------


def test_a_store_ahead_of_its_changelog_says_the_changelog_is_another_and_nothing_is_lost() -> None:
    line = rebuild_reason(45, 0, 0)
    assert line.startswith("local store at offset 45 is outside the changelog [0, 0]: ")
    assert "deleted and created again" in line and "another broker" in line
    assert "nothing is lost" in line and line.endswith("rebuilding it from the changelog")


def test_a_store_behind_a_compacted_changelog_says_so() -> None:
    line = rebuild_reason(3, 10, 50)
    assert "compacted out of the changelog" in line and "nothing is lost" in line


def test_a_store_without_an_offset_says_so() -> None:
    assert "no changelog offset" in rebuild_reason(None, 0, 7)
