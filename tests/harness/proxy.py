"""A TCP proxy in front of the test broker that can cut the network.

Every client must reach the broker through it: start the broker with its advertised listener at
the proxy's port (`LocalBroker(advertised_port=proxy.port)`), or metadata sends the clients around
it. `cut(seconds)` closes every open connection and refuses new ones (the listening socket is
closed, so a connect gets "connection refused", as from a broker that is down) until the time is
up; then connections are accepted and forwarded again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time

from hydrator.kafka.local_broker import free_port

_CHUNK = 256 * 1024


class TcpProxy:
    def __init__(self, target_port: int, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port or free_port()
        self._target = (host, target_port)
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._closed = threading.Event()
        self._accepting = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tcp-proxy", daemon=True)
        self.connections = 0  # accepted since start

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> TcpProxy:
        self._listen()
        self._thread.start()
        return self

    def cut(self, seconds: float) -> None:
        """Drop every connection now and refuse new ones for `seconds` (returns at once)."""
        with self._lock:
            self._accepting.clear()
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            pairs, self._pairs = self._pairs, set()
        for client, upstream in pairs:
            _close(client)
            _close(upstream)
        timer = threading.Timer(seconds, self.restore)
        timer.daemon = True
        timer.start()

    def restore(self) -> None:
        """Accept connections again (ends a cut early, or when its time is up)."""
        with self._lock:
            if self._listener is None and not self._closed.is_set():
                self._listen()

    @property
    def is_cut(self) -> bool:
        return not self._accepting.is_set()

    def stop(self) -> None:
        self._closed.set()
        self.cut(0)
        self._accepting.set()  # wake the accept loop so it sees the stop
        self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(128)
        listener.settimeout(0.2)
        self._listener = listener
        self._accepting.set()

    def _serve(self) -> None:
        while not self._closed.is_set():
            self._accepting.wait()
            with self._lock:
                listener = self._listener
            if listener is None:
                time.sleep(0.05)
                continue
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by a cut
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:  # a cut began while we connected
                    _close(client)
                    _close(upstream)
                    continue
                self._pairs.add((client, upstream))
                self.connections += 1
            threading.Thread(
                target=self._pump, args=(client, upstream), name="tcp-proxy-pump", daemon=True
            ).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peer = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            try:
                for sock in peer:
                    sock.setblocking(True)
                    selector.register(sock, selectors.EVENT_READ)
                while True:
                    for key, _ in selector.select(timeout=0.5):
                        data = key.fileobj.recv(_CHUNK)  # type: ignore[union-attr]
                        if not data:
                            raise ConnectionError("closed")
                        peer[key.fileobj].sendall(data)  # type: ignore[index]
                    if (client, upstream) not in self._pairs:
                        raise ConnectionError("cut")
            except (OSError, ValueError, ConnectionError):
                pass
        with self._lock:
            self._pairs.discard((client, upstream))
        _close(client)
        _close(upstream)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
