"""The settings of `--reselect` (hydrator/reselect/client.py). Importing this module loads no
database driver: every run's configuration holds one."""

from __future__ import annotations

from dataclasses import dataclass, field

from hydrator.secrets import url_passwords

# Defaults of the options
DEFAULT_STATEMENT_TIMEOUT_MS = 2_000


@dataclass(frozen=True)
class ReselectSettings:
    """`dsn`: a libpq connection string or URI (a secret). `max_qps`: queries a second at most
    (None: no cap)."""

    dsn: str = field(repr=False)
    max_qps: float | None = None
    statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS
    connect_timeout_s: int = 2
    retry_after_s: float = 5.0

    def target(self) -> str:
        """What messages say the database is: host, port and name, nothing secret."""
        from psycopg.conninfo import conninfo_to_dict

        try:
            parts = conninfo_to_dict(self.dsn)
        except Exception:
            return "the --reselect database"
        host = parts.get("host") or "localhost"
        return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"

    def secrets(self) -> set[str]:
        from psycopg.conninfo import conninfo_to_dict

        found = set(url_passwords(self.dsn))
        try:
            password = conninfo_to_dict(self.dsn).get("password")
        except Exception:
            password = None
        if password:
            found.add(str(password))
        return {s for s in found if s}
