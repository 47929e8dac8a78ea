"""The operators' HTTP server holds up against clients that connect and say nothing, or say it
slowly: connections and threads stay bounded and a probe still gets its answer."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from hydrator.metrics.bounded_http import BoundedHTTPServer
from tests.harness.idle_clients import idle_clients


class Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def server(**limits: float) -> Iterator[BoundedHTTPServer]:
    bounded = BoundedHTTPServer(("127.0.0.1", 0), Ok, **limits)  # type: ignore[arg-type]
    bounded.start()
    try:
        yield bounded
    finally:
        bounded.close()


def get(port: int, timeout_s: float = 5) -> str:
    url = f"http://127.0.0.1:{port}/healthz"
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.read().decode()


def test_many_idle_connections_cost_no_threads_and_a_probe_still_answers() -> None:
    threads_before = threading.active_count()
    with server(max_connections=32) as bounded, idle_clients(bounded.port, 400):
        assert get(bounded.port) == "ok\n"
        time.sleep(0.5)  # let the server's loop see every connection
        assert bounded.open_connections <= 32
        # the server's own thread and at most its pool of workers
        assert threading.active_count() - threads_before <= 1 + 4
        assert get(bounded.port) == "ok\n"


def test_idle_connections_are_closed_after_the_idle_timeout() -> None:
    with server(idle_timeout_s=0.5) as bounded, idle_clients(bounded.port, 5) as clients:
        deadline = time.monotonic() + 5
        while bounded.open_connections and time.monotonic() < deadline:
            time.sleep(0.1)
        assert bounded.open_connections == 0
        for client in clients:  # the server closed its side: the client reads end-of-stream
            assert client.recv(1) == b""


def test_a_slow_client_holds_a_worker_no_longer_than_the_read_timeout() -> None:
    with server(workers=1, read_timeout_s=0.5) as bounded:
        slow = socket.create_connection(("127.0.0.1", bounded.port))
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")  # and never the rest
        started = time.monotonic()
        assert get(bounded.port, timeout_s=10) == "ok\n"  # waits for the one worker
        assert time.monotonic() - started < 5
        slow.close()


def test_when_every_connection_is_being_served_a_new_one_is_refused_not_queued() -> None:
    with server(max_connections=2, workers=2, read_timeout_s=3) as bounded:
        slow = [socket.create_connection(("127.0.0.1", bounded.port)) for _ in range(2)]
        for client in slow:
            client.sendall(b"GET /healthz HTTP/1.1\r\n")
        time.sleep(0.5)
        with pytest.raises(OSError):
            get(bounded.port, timeout_s=2)
        for client in slow:
            client.close()
        time.sleep(0.5)
        assert get(bounded.port) == "ok\n"
