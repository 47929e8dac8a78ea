"""Clients that connect to a port and say nothing, as a scanner or a stuck client would: what the
operators' HTTP server (hydrator/metrics/bounded_http.py) has to hold up against."""

from __future__ import annotations

import contextlib
import resource
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def idle_clients(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` open connections to 127.0.0.1:`port` that send nothing, closed on exit. This
    process's descriptor limit is raised for them while they are open, if it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 512)), hard))
    clients: list[socket.socket] = []
    try:
        for _ in range(count):
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        yield clients
    finally:
        for client in clients:
            client.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
