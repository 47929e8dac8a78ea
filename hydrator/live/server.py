"""One port for the browser: the page at `/`, its websocket at `/ws`, `/healthz` for probes.

The Kafka feed runs in a thread and hands each change to the event loop, which keeps the latest
rows (for browsers that connect later) and broadcasts the change to every open page."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.http11 import Request, Response

from hydrator.live.access import Access
from hydrator.live.rows import LatestRows, RowChange

log = logging.getLogger(__name__)

PAGE = Path(__file__).with_name("page.html")


class LiveView:
    def __init__(self, capacity: int, access: Access | None = None) -> None:
        self.access = access or Access()
        self.latest = LatestRows(capacity)
        self.pages: set[ServerConnection] = set()
        self.page_html = PAGE.read_text()

    def publish(self, change: RowChange) -> None:
        """Called on the event loop for every change the feed reads."""
        message = self.latest.apply(change)
        broadcast(self.pages, json.dumps(message))

    async def handle(self, connection: ServerConnection) -> None:
        await connection.send(json.dumps(self.latest.snapshot()))
        self.pages.add(connection)
        try:
            await connection.wait_closed()
        finally:
            self.pages.discard(connection)

    def route(self, connection: ServerConnection, request: Request) -> Response | None:
        """Plain HTTP for everything but the websocket path (None: go on with the handshake)."""
        url = urlsplit(request.path)
        path = url.path
        if path == "/healthz":
            return _response(connection, HTTPStatus.OK, "ok\n", "text/plain")
        if path not in ("/", "/ws"):
            return _response(connection, HTTPStatus.NOT_FOUND, "not found\n", "text/plain")
        token = parse_qs(url.query).get("token", [None])[0]
        if not self.access.token_ok(token):
            log.warning("refused %s: no valid token", path)
            return _response(connection, HTTPStatus.UNAUTHORIZED, "token needed\n", "text/plain")
        if path == "/ws":
            origin = request.headers.get("Origin")
            if not self.access.origin_ok(origin, request.headers.get("Host")):
                log.warning("refused a websocket from origin %s (see --allow-origin)", origin)
                refused = "origin refused\n"
                return _response(connection, HTTPStatus.FORBIDDEN, refused, "text/plain")
            return None
        return _response(connection, HTTPStatus.OK, self.page_html, "text/html")


def _response(
    connection: ServerConnection, status: HTTPStatus, body: str, content_type: str
) -> Response:
    response = connection.respond(status, body)
    del response.headers["Content-Type"]
    response.headers["Content-Type"] = f"{content_type}; charset=utf-8"
    response.headers["Cache-Control"] = "no-store"
    return response


async def serve_live(
    host: str,
    port: int,
    capacity: int,
    start_feed: Any,
    stop: threading.Event,
    access: Access | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT (or the feed thread ends); `start_feed(deliver)` starts the
    feed thread with a thread-safe `deliver`."""
    loop = asyncio.get_running_loop()
    view = LiveView(capacity, access)
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)

    def deliver(change: RowChange) -> None:
        loop.call_soon_threadsafe(view.publish, change)

    feed = start_feed(deliver)
    async with serve(view.handle, host, port, process_request=view.route) as server:
        bound = next(iter(server.sockets)).getsockname()
        log.info("live view on http://%s:%s/", bound[0], bound[1])
        while not done.is_set() and feed.is_alive():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 1.0)
    stop.set()
    feed.join(10)
