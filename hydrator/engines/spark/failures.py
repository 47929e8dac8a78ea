"""A query that a Python worker's deliberate stop or temporary failure ended, told apart at the
driver.

The core lets some exceptions through rather than dead-lettering the record: `--on-unresolved
fail`'s `UnresolvedColumnsError`, and infrastructure failures (a schema registry that does not
answer: `Unavailable`, a `TemporaryFailure`). In the embedded engine such an exception reaches
the top: the run says so in one line and exits 1, or 75 for a supervisor to restart it. In Spark
it is raised in a Python worker, fails the task, and reaches the driver only as the text of a
`StreamingQueryException`: the query's state and plan, and the worker's traceback ending in
`hydrator.events.Unavailable: ...`. `worker_error_in` finds that line, so the engine can end
the run the same way, in one line, not the query's hundred; the micro-batch was not committed,
so the restarted query reads it again.
"""

from __future__ import annotations

import importlib
import re

from hydrator.core.settings import UnresolvedColumnsError
from hydrator.errors import HydratorError, TemporaryFailure

# the last line of a Python traceback: `package.module.ExceptionType: message`
_RAISED = re.compile(r"^((?:hydrator|state)(?:\.\w+)+)\.(\w+): (.*)$", re.MULTILINE)


class WorkerTemporaryFailure(TemporaryFailure, RuntimeError):
    """A temporary failure raised in a Spark worker (exit 75); the message is the worker's."""


def worker_error_in(
    text: str, kinds: tuple[type[HydratorError], ...] = (HydratorError,)
) -> tuple[type[HydratorError], str] | None:
    """The type and message of the first exception of `kinds` (the project's) that the query's
    error text says a worker raised; None when it names none."""
    for match in _RAISED.finditer(text):
        module, name, message = match.groups()
        try:
            raised = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(raised, type) and issubclass(raised, kinds):
            return raised, message.strip()
    return None


def driver_error(text: str) -> HydratorError | None:
    """The error the driver ends the run with for a query a worker's deliberate stop or
    temporary failure ended (None for any other failure: a crash keeps its whole trace)."""
    found = worker_error_in(text, (UnresolvedColumnsError, TemporaryFailure))
    if found is None:
        return None
    raised, message = found
    if issubclass(raised, UnresolvedColumnsError):
        return UnresolvedColumnsError(message)
    return WorkerTemporaryFailure(f"{raised.__name__}: {message}")


def summary(text: str) -> str:
    """One line for a failed query's error text: the worker's error when one of the project's
    is named, else the text's first line."""
    found = worker_error_in(text)
    if found is not None:
        return f"{found[0].__name__}: {found[1]}"
    return text.strip().splitlines()[0] if text.strip() else text


# Spark's Kafka connector from Apache Spark's master after 4.1 reports the source's metrics with
# the latest offsets it last fetched, wrapped as `Some(null)` when it fetched none: a batch a
# restarted query replays from the offset log (planned before a crash, never committed) is run
# without fetching them, and its progress report then fails the query, after the batch's commit.
# A new start of the query goes on from there.
_REPLAYED_BATCH_REPORT = ('"scala.Option.get()" is null', "KafkaMicroBatchStream")


def replayed_batch_report_failed(text: str) -> bool:
    """Whether a query's error text (message and JVM trace) is that failure."""
    return all(part in text for part in _REPLAYED_BATCH_REPORT)


__all__ = [
    "WorkerTemporaryFailure",
    "driver_error",
    "replayed_batch_report_failed",
    "summary",
    "worker_error_in",
]
