"""Who may read the live view: every row of the enriched topics goes over its websocket.

Browsers send `Origin` with every websocket handshake and do not stop a page of one origin from
opening a socket to another, so without a check any web page the operator visits could read the
rows. The default admits the view's own origin only (Origin equal to the `Host` the browser
addressed), and only where that host is a loopback name or an IP address: a DNS name could be
rebound by an attacker's page to this machine, with Origin and Host then matching. Any other
origin is admitted by name (`--allow-origin`). A handshake without Origin is not a browser's; a
token (`--token`), when set, is asked of every client, browser or not.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@dataclass(frozen=True)
class Access:
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    token: str | None = None

    def token_ok(self, given: str | None) -> bool:
        if not self.token:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def origin_ok(self, origin: str | None, host: str | None) -> bool:
        if origin is None:
            return True
        origin = origin.rstrip("/").lower()
        if origin in self.allowed_origins:
            return True
        if host is None:
            return False
        parts = urlsplit(origin)
        return (
            parts.scheme in ("http", "https")
            and parts.netloc == host.lower()
            and _is_local_or_literal(parts.hostname or "")
        )


def access(allowed_origins: tuple[str, ...], token: str | None) -> Access:
    return Access(frozenset(o.rstrip("/").lower() for o in allowed_origins), token or None)


def _is_local_or_literal(hostname: str) -> bool:
    if hostname in LOOPBACK_NAMES:
        return True
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True
