"""A query that a Python worker's temporary failure ended, told apart at the driver.

The core lets infrastructure failures through rather than dead-lettering the record (a schema
registry that does not answer: `Unavailable`, a `TemporaryFailure`). In the embedded engine that
exception reaches the top and the run exits 75 for a supervisor to restart it. In Spark it is
raised in a Python worker, fails the task, and reaches the driver only as the text of a
`StreamingQueryException`: the worker's traceback, ending in `hydrator.events.Unavailable: ...`.
`temporary_failure_in` finds that line, so the engine can end the run the same way (exit 75);
the micro-batch was not committed, so the restarted query reads it again.
"""

from __future__ import annotations

import importlib
import re

from hydrator.errors import TemporaryFailure

# the last line of a Python traceback: `package.module.ExceptionType: message`
_RAISED = re.compile(r"^((?:hydrator|state)(?:\.\w+)+)\.(\w+): (.*)$", re.MULTILINE)


class WorkerTemporaryFailure(TemporaryFailure, RuntimeError):
    """A temporary failure raised in a Spark worker (exit 75); the message is the worker's."""


def temporary_failure_in(text: str) -> str | None:
    """`ExceptionType: message` of the temporary failure a worker raised, as the query's error
    text shows it; None when the text names none (then the failure is fatal, exit 1)."""
    for match in _RAISED.finditer(text):
        module, name, message = match.groups()
        try:
            kind = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(kind, type) and issubclass(kind, TemporaryFailure):
            return f"{name}: {message.strip()}"
    return None


__all__ = ["WorkerTemporaryFailure", "temporary_failure_in"]
