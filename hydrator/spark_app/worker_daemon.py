"""PySpark's Python worker daemon (`pyspark.daemon`), as the engine has Spark start it
(`spark.python.daemon.module`), without the one trace it prints that is no fault.

A task that is abandoned - a stop interrupting a micro-batch, a cancelled job - has the JVM close
its worker's socket while the worker may still be writing to it. The worker's last flush then
fails (BrokenPipeError, or ConnectionResetError), and PySpark prints that traceback on the
daemon's stderr, which is the JVM's, out of the engine's logging, just before the worker ends
as it must. Nothing is lost: no one
reads that worker any more, and the batch is done again. Every other error is printed as PySpark
prints it.

It imports nothing beyond what `pyspark.daemon` does: the daemon forks its workers, and modules
that start threads when imported (pandas, pyarrow) must not be loaded before that.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

from pyspark import daemon

_SOCKET_GONE = (BrokenPipeError, ConnectionResetError)


class _QuietAboutClosedSockets:
    """The traceback module as `pyspark.daemon` sees it: `print_exc` prints nothing when the
    error is the JVM's end of the socket gone."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    def print_exc(self, *args: Any, **kwargs: Any) -> None:
        if isinstance(sys.exc_info()[1], _SOCKET_GONE):
            return
        traceback.print_exc(*args, **kwargs)


def main() -> None:
    daemon.traceback = _QuietAboutClosedSockets()  # type: ignore[assignment]
    daemon.manager()


if __name__ == "__main__":
    main()
