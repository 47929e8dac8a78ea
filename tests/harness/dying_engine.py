"""`hydrator` in a process that dies mid-commit, as a SIGKILL at the worst moment would leave it.

It dies (`os._exit`, no clean-up: the transaction stays open on the broker) right after a commit
has delivered the batch's outputs and changelog records and before it sends the input offsets:
the transaction is as complete as it gets without committing. It dies at the first commit whose
changelog writes every state key listed (hex, comma-separated) in `DIE_WITH_STATE_KEYS`; with
`--workers 1`, since the supervisor's workers are processes of their own.

    DIE_WITH_STATE_KEYS=... python -m tests.harness.dying_engine run ...
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from hydrator.cli import main
from hydrator.engines.embedded.transaction import TransactionalWriter

DIE_WITH_STATE_KEYS = "DIE_WITH_STATE_KEYS"
EXIT_CODE = 137  # what a shell reports for a SIGKILLed process


def _arm(needles: set[bytes]) -> None:
    commit, flush = TransactionalWriter.commit, TransactionalWriter._flush
    dying = False

    def commit_then_maybe_die(
        self: TransactionalWriter,
        changes: Mapping[int, Mapping[bytes, bytes | None]],
        *rest: Any,
    ) -> dict[int, int]:
        nonlocal dying
        written = {key for encoded in changes.values() for key in encoded}
        dying = needles <= written
        return commit(self, changes, *rest)

    def flush_then_maybe_die(self: TransactionalWriter) -> None:
        flush(self)
        if dying:
            print("dying_engine: died after the changelog flush", file=sys.stderr, flush=True)
            os._exit(EXIT_CODE)

    TransactionalWriter.commit = commit_then_maybe_die  # type: ignore[method-assign]
    TransactionalWriter._flush = flush_then_maybe_die  # type: ignore[method-assign]


if __name__ == "__main__":
    _arm({bytes.fromhex(key) for key in os.environ[DIE_WITH_STATE_KEYS].split(",")})
    sys.argv[0] = "hydrator"
    main()
