"""Who may open the live view's websocket: its own origin, origins named by --allow-origin, and
with --token only clients that give it. A page of another origin must not read the rows."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.harness.kafka import Broker
from tests.integration.operations.test_live_view import LISTENING

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def live_view(broker: Broker, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
              ) -> Iterator[str]:  # fmt: skip
    log_path = tmp_path / "live.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "hydrator.live", "--bootstrap-servers",
             broker.bootstrap_servers, "--topic", "nothing-here", "--port", "0", *extra],
            stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not (match := LISTENING.search(log_path.read_text())):
                assert process.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
            yield match.group(1)
        finally:
            process.terminate()
            process.wait(30)


def ws_status(url: str, origin: str | None, query: str = "") -> int:
    """101 when the handshake is accepted, else the HTTP status the view answered."""
    ws_url = url.replace("http://", "ws://") + "ws" + query
    try:
        with connect(ws_url, origin=origin, open_timeout=10):  # type: ignore[arg-type]
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_cross_origin_websocket_is_refused_and_own_origin_accepted(
    kafka_broker: Broker, tmp_path: Path
) -> None:
    with live_view(kafka_broker, tmp_path, "--allow-origin", "https://dash.example") as url:
        own = url.rstrip("/")  # http://127.0.0.1:PORT
        port = own.rsplit(":", 1)[1]
        assert ws_status(url, own) == 101
        assert ws_status(url, "http://evil.example") == 403
        # a DNS name pointed at this machine (rebinding) is not the view's own origin
        assert ws_status(url, f"http://evil.example:{port}") == 403
        assert ws_status(url, "https://dash.example") == 101
        assert ws_status(url, None) == 101  # not a browser: no Origin
    assert (
        "refused a websocket from origin http://evil.example" in (tmp_path / "live.log").read_text()
    )


def test_a_token_is_asked_of_every_client(kafka_broker: Broker, tmp_path: Path) -> None:
    with live_view(kafka_broker, tmp_path, env={"HYDRATOR_LIVE_TOKEN": "s3cret"}) as url:
        own = url.rstrip("/")
        assert ws_status(url, own) == 401
        assert ws_status(url, own, "?token=wrong") == 401
        assert ws_status(url, own, "?token=s3cret") == 101
        assert http_status(url) == 401
        assert http_status(url + "?token=s3cret") == 200
        assert http_status(url + "healthz") == 200  # probes need no token
    assert "s3cret" not in (tmp_path / "live.log").read_text()
