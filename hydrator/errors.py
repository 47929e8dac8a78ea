"""What can go wrong, by kind; the kind says how `hydrator run` ends.

Every error the hydrator raises on purpose derives from `HydratorError`, through one of its kinds,
and `exit_code_for` is the one place an exception becomes an exit code:

* `ConfigurationError` (exit 2): a bad option, configuration or use; the message names what to
  change. Started again as it is, it fails again.
* `TemporaryFailure` (exit 75, EX_TEMPFAIL): something outside the process failed or is missing
  (no broker within --startup-timeout, a Kafka call blocked past its timeout): a supervisor
  should start the process again.
* `StorageError` (exit 75): the local state store failed (a read or write error, damage). An
  infrastructure failure as a failing broker is, never a dead letter: the embedded engine starts
  itself again as it does after a broker failure; one that reaches the top ends the run as the
  engine's other infrastructure failures do (75), for a supervisor to start it again.
* `Stopped` (exit 130): asked to stop, and the run could not finish cleanly.
* `RecordError`: one record cannot be processed; it becomes a dead letter, not an exit (exit 1
  should one ever reach the top).
* `HydratorError` itself (exit 1): a fatal error while running.

This module imports nothing of the project, so that every layer may raise its kinds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

EXIT_FATAL = 1
EXIT_USAGE = 2  # click's, for a usage error
EXIT_TEMPORARY = 75  # EX_TEMPFAIL (sysexits.h): a supervisor should start the process again
EXIT_STOPPED = 130  # what an interrupted run exits with anyway (128 + SIGINT)


class HydratorError(Exception):
    """The root of the hydrator's own errors: a fatal error while running (exit 1)."""

    exit_code = EXIT_FATAL


class ConfigurationError(HydratorError):
    """A bad option, configuration or use (exit 2); the message names what to change."""

    exit_code = EXIT_USAGE


class TemporaryFailure(HydratorError):
    """Something the process needs is not there now (exit 75): a supervisor should start it again
    later."""

    exit_code = EXIT_TEMPORARY


class StorageError(HydratorError):
    """The local state store failed under a read or a write (exit 75). An infrastructure failure,
    as a failing broker is, never a record's fault: the core lets it through, the engine aborts
    the open batch and starts again (state/errors.py has the state layer's own). `path` names
    the store (None when the failing store is not known), so the engine can move that one
    aside."""

    exit_code = EXIT_TEMPORARY

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class Stopped(HydratorError):
    """Asked to stop (exit 130 when it reaches the top: the run did not finish cleanly)."""

    exit_code = EXIT_STOPPED


class RecordError(HydratorError):
    """One record cannot be processed; it goes to the dead-letter topic with this message."""


def exit_code_for(error: BaseException) -> int:
    """The exit code of a run that `error` ended."""
    if isinstance(error, KeyboardInterrupt):
        return EXIT_STOPPED
    if isinstance(error, HydratorError):
        return error.exit_code
    return EXIT_FATAL
