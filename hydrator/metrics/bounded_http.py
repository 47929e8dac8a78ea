"""An HTTP server for operators' endpoints that clients cannot exhaust.

The standard library's ThreadingHTTPServer starts a thread per connection and waits on each as
long as the client likes: a few hundred idle connections take every descriptor of a process
under systemd's default limit of 1,024, and the engine's next file open (RocksDB) fails. Here a
connection costs a thread only once its request has started to arrive:

* accepted connections wait in a selector, without a thread, until they send something or
  `idle_timeout_s` passes (then they are closed);
* at most `max_connections` are open at once; a new one evicts the connection that has waited
  longest without sending anything, so a probe still gets in while idle clients pile up, and is
  refused (closed at once) only when every open connection is being served;
* a fixed pool of `workers` threads serves requests, each socket with a `read_timeout_s` per read,
  so a slow client holds one worker for a bounded time.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
WORKERS = 4
IDLE_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 5.0
_TICK_S = 0.5


class BoundedHTTPServer:
    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        name: str = "http",
        max_connections: int = MAX_CONNECTIONS,
        workers: int = WORKERS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._handler = handler
        self._max_connections = max_connections
        self._idle_timeout_s = idle_timeout_s
        self._read_timeout_s = read_timeout_s
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._listener = socket.create_server(address, family=family, backlog=128)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.server_address = self._listener.getsockname()  # read by BaseHTTPRequestHandler
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        # Connections waiting for their first bytes, oldest first: socket -> accepted at. Only
        # the server's own thread touches it.
        self._waiting: collections.OrderedDict[socket.socket, float] = collections.OrderedDict()
        self._serving = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{name}-worker")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for connection in list(self._waiting):
            _close(connection)
        self._waiting.clear()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._selector.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            serving = self._serving
        return len(self._waiting) + serving

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(_TICK_S):
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._dispatch(key.fileobj)  # type: ignore[arg-type]
            self._close_idle()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: leave it in the backlog for now
                log.debug("accept failed: %s", exc)
                return
            with self._lock:
                full = len(self._waiting) + self._serving >= self._max_connections
            if full and not self._evict_oldest_waiting():
                _close(connection)  # every open connection is being served
                continue
            connection.setblocking(False)
            self._waiting[connection] = time.monotonic()
            self._selector.register(connection, selectors.EVENT_READ)

    def _evict_oldest_waiting(self) -> bool:
        if not self._waiting:
            return False
        oldest = next(iter(self._waiting))
        self._forget(oldest)
        _close(oldest)
        return True

    def _dispatch(self, connection: socket.socket) -> None:
        self._forget(connection)
        with self._lock:
            self._serving += 1
        connection.setblocking(True)
        connection.settimeout(self._read_timeout_s)
        try:
            self._pool.submit(self._serve, connection)
        except RuntimeError:  # the pool is shut down: closing
            self._served(connection)

    def _serve(self, connection: socket.socket) -> None:
        try:
            peer = connection.getpeername()
            self._handler(connection, peer, self)  # type: ignore[arg-type]
        except OSError as exc:  # timed out or reset: the client's loss
            log.debug("connection ended: %s", exc)
        except Exception:
            log.exception("the HTTP handler failed")
        finally:
            self._served(connection)

    def _served(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_WR)
        _close(connection)
        with self._lock:
            self._serving -= 1

    def _close_idle(self) -> None:
        deadline = time.monotonic() - self._idle_timeout_s
        while self._waiting:
            oldest, accepted = next(iter(self._waiting.items()))
            if accepted > deadline:
                return
            self._forget(oldest)
            _close(oldest)

    def _forget(self, connection: socket.socket) -> None:
        self._waiting.pop(connection, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(connection)


def _close(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.close()
