"""The hydrator's log lines on stderr: `--log-format text` (default) or `json`.

json: one object per line with `time` (UTC, ISO 8601), `level`, `logger`, `message`,
`application_id`, and whatever the line carries besides (the progress line: `counts`, `lag`,
`rate`; a jump warning: `counter`, `rise`, `records`), plus `exception` for a traceback.

A worker process of a run with several workers (--workers) marks its lines: `[worker N]` after
the logger's name in text, a `worker` field in json.

In both formats every secret value of the configuration (hydrator/secrets.py) is replaced by
`***` in the finished line, whatever put it there (a message, an exception, a Kafka client's log).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime

from hydrator.secrets import redact

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
WORKER_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [worker %(worker)s]: %(message)s"
# What every LogRecord has; anything else on a record came with the line (`extra=`).
_STANDARD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class _Redacting(logging.Formatter):
    def __init__(self, secrets: Iterable[str], fmt: str | None = None) -> None:
        super().__init__(fmt)
        secrets = {s for s in secrets if s}
        # A secret inside a JSON string is escaped (quotes, backslashes, control characters).
        self._secrets = secrets | {json.dumps(s, ensure_ascii=False)[1:-1] for s in secrets}

    def redact(self, text: str) -> str:
        return redact(text, self._secrets)


class TextFormatter(_Redacting):
    def __init__(self, secrets: Iterable[str] = (), fmt: str = TEXT_FORMAT) -> None:
        super().__init__(secrets, fmt)

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


class JsonFormatter(_Redacting):
    def __init__(self, application_id: str, secrets: Iterable[str] = ()) -> None:
        super().__init__(secrets)
        self.application_id = application_id

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "application_id": self.application_id,
        }
        for name, value in vars(record).items():
            if name not in _STANDARD_ATTRIBUTES and name not in entry:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return self.redact(json.dumps(entry, ensure_ascii=False, default=str))


class _WorkerTag(logging.Filter):
    def __init__(self, worker: int) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self.worker
        return True


def formatter(
    log_format: str, application_id: str, secrets: Iterable[str], worker: int | None = None
) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(application_id, secrets)
    if log_format == "text":
        return TextFormatter(secrets, TEXT_FORMAT if worker is None else WORKER_TEXT_FORMAT)
    raise ValueError(f"unknown log format {log_format!r}; one of {', '.join(LOG_FORMATS)}")


def configure(
    level: str,
    log_format: str,
    application_id: str,
    secrets: Iterable[str],
    worker: int | None = None,
) -> None:
    """Every logger of the process writes to stderr through one redacting formatter; `worker`:
    the process is that worker of a run with several."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format, application_id, secrets, worker))
    if worker is not None:
        handler.addFilter(_WorkerTag(worker))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
