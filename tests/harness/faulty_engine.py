"""`hydrator` in a process with one fault injected at the worst moment of a commit: right after
the batch's outputs and changelog records are delivered, before the input offsets are sent.

* `DIE_WITH_STATE_KEYS` (hex state keys, comma-separated): it dies there (`os._exit`, no
  clean-up: the transaction stays open on the broker), as a SIGKILL would leave it, at the first
  commit whose changelog writes every key listed (none listed: the first that writes any); with
  `--workers 1`, since the supervisor's workers are processes of their own.
* `STALL_COMMIT_S` (seconds): the first commit that writes anything stalls there that long, as a
  batch slower than the producer's `transaction.timeout.ms` would, and then goes on.

    DIE_WITH_STATE_KEYS=... python -m tests.harness.faulty_engine run ...
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from hydrator.cli import main
from hydrator.engines.embedded.transaction import TransactionalWriter

DIE_WITH_STATE_KEYS = "DIE_WITH_STATE_KEYS"
STALL_COMMIT_S = "STALL_COMMIT_S"
EXIT_CODE = 137  # what a shell reports for a SIGKILLed process


def _arm(fault: str, needles: set[bytes], stall_s: float) -> None:
    commit, flush = TransactionalWriter.commit, TransactionalWriter._flush
    armed = True  # the stall happens once
    chosen = False

    def commit_and_choose(
        self: TransactionalWriter,
        changes: Mapping[int, Mapping[bytes, bytes | None]],
        *rest: Any,
    ) -> dict[int, int]:
        nonlocal chosen
        written = {key for encoded in changes.values() for key in encoded}
        if fault == DIE_WITH_STATE_KEYS:
            chosen = bool(written) and needles <= written
        else:
            chosen = bool(written) and armed
        return commit(self, changes, *rest)

    def flush_then_fail(self: TransactionalWriter) -> None:
        nonlocal armed
        flush(self)
        if not chosen:
            return
        if fault == DIE_WITH_STATE_KEYS:
            print("faulty_engine: died after the changelog flush", file=sys.stderr, flush=True)
            os._exit(EXIT_CODE)
        armed = False
        print(f"faulty_engine: stalling the commit {stall_s:g} s", file=sys.stderr, flush=True)
        time.sleep(stall_s)

    TransactionalWriter.commit = commit_and_choose  # type: ignore[method-assign]
    TransactionalWriter._flush = flush_then_fail  # type: ignore[method-assign]


if __name__ == "__main__":
    if DIE_WITH_STATE_KEYS in os.environ:
        keys = {bytes.fromhex(key) for key in os.environ[DIE_WITH_STATE_KEYS].split(",") if key}
        _arm(DIE_WITH_STATE_KEYS, keys, 0)
    else:
        _arm(STALL_COMMIT_S, set(), float(os.environ[STALL_COMMIT_S]))
    sys.argv[0] = "hydrator"
    main()
