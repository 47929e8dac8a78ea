"""The shared Debezium connector settings and the compose stack's registration of them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hydrator.demo.connector import (
    ConnectorConfigError,
    connector_config,
    read_settings,
    register,
    shared_settings,
)


def test_shared_settings_are_the_ones_the_hydrator_needs() -> None:
    settings = shared_settings()
    assert settings["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    # base64 modes ship an unchanged TOASTed bytea as null, which nothing can fill
    assert settings["binary.handling.mode"] in ("bytes", "hex")


def test_a_deployment_adds_settings_but_cannot_change_a_shared_one() -> None:
    shared = {"plugin.name": "pgoutput", "poll.interval.ms": "100"}
    merged = connector_config({"topic.prefix": "shop", "plugin.name": "pgoutput"}, shared)
    assert merged == {"plugin.name": "pgoutput", "poll.interval.ms": "100", "topic.prefix": "shop"}
    with pytest.raises(ConnectorConfigError, match=r"prod\.json: .*\(plugin\.name\)"):
        connector_config({"plugin.name": "decoderbufs"}, shared, origin="prod.json")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[1, 2]", "must be a JSON object"),
        ('{"poll.interval.ms": 100}', "'poll.interval.ms' must be a string, not int"),
        ("{nope", "cannot read connector settings"),
    ],
)
def test_unusable_settings_files_are_named(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "connector.json"
    path.write_text(content)
    with pytest.raises(ConnectorConfigError, match=f"{path}: .*{reason}"):
        read_settings(path)


class _ConnectStandIn(BaseHTTPRequestHandler):
    """Answers like Kafka Connect's REST API: 503 while starting (the first `starting`
    requests), then 201 for a new connector."""

    starting = 1
    received: list[tuple[str, str, Any]] = []  # noqa: RUF012 - one server per test

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append((self.path, self.headers["Content-Type"], body))
        status = 503 if len(type(self).received) <= type(self).starting else 201
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def connect_url() -> Iterator[str]:
    _ConnectStandIn.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ConnectStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_register_puts_the_config_and_waits_for_connect(connect_url: str) -> None:
    config = {"connector.class": "x", "topic.prefix": "shop"}
    assert register(connect_url, "customers", config, timeout_s=30) == 201
    assert len(_ConnectStandIn.received) == 2  # asked again after the 503
    path, content_type, body = _ConnectStandIn.received[-1]
    assert (path, content_type, body) == (
        "/connectors/customers/config",
        "application/json",
        config,
    )


def test_register_gives_up_when_connect_never_answers() -> None:
    with pytest.raises(TimeoutError, match="did not take 'customers'"):
        register("http://127.0.0.1:9", "customers", {}, timeout_s=0)
