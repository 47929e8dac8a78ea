"""An `--available-now` run that sent most of what it read to the dead-letter topic did not
succeed, whatever else went right: the commonest cause is a wrong `--format`, and a run that
exits 0 with every record dead-lettered looks like success. Over `--max-dlq-ratio` of the
records read (default 0.5; 0 turns the check off) the run ends with EXIT_TOO_MANY_DEAD_LETTERS
and one line saying so. The records stay in the dead-letter topic, each with its reason in the
`hydrator.error` header; the committed offsets stay committed. The embedded engine's line ends
with the command that replays them once the cause is fixed (`hydrator dlq replay ...`,
hydrator/dlq/command.py).
"""

from __future__ import annotations

import logging

log = logging.getLogger("hydrator")

DEFAULT_MAX_DLQ_RATIO = 0.5
# sysexits' EX_DATAERR, "the input data was incorrect": the run itself worked (2 is bad usage,
# 1 a failure of the run, 75 a temporary one).
EXIT_TOO_MANY_DEAD_LETTERS = 65


def too_many_dead_letters(
    records: int, dead_letters: int, max_ratio: float, replay: str | None = None
) -> str | None:
    """The line to end the run with, or None when the share of dead letters is acceptable.
    `replay`: the command that replays the dead letters, for the line to name."""
    if max_ratio <= 0 or records <= 0 or dead_letters <= 0:
        return None
    ratio = dead_letters / records
    if ratio <= max_ratio:
        return None
    then = f"; once the cause is fixed, replay them: {replay}" if replay else ""
    return (
        f"{dead_letters} of {records} records read ({ratio:.0%}) went to the dead-letter "
        f"topic, more than --max-dlq-ratio {max_ratio:g}: is --format right? Each dead "
        f"letter's hydrator.error header says why{then} (exit {EXIT_TOO_MANY_DEAD_LETTERS})"
    )


class TooManyDeadLetters(SystemExit):
    """Ends the process with EXIT_TOO_MANY_DEAD_LETTERS (raised once the line is logged, after
    the run's own clean-up: nothing above it has anything left to do)."""

    def __init__(self) -> None:
        super().__init__(EXIT_TOO_MANY_DEAD_LETTERS)


def check_dead_letters(
    records: int, dead_letters: int, max_ratio: float, replay: str | None = None
) -> None:
    """Log the line and end the run when too many of its records were dead-lettered (`replay`:
    the command that replays them)."""
    line = too_many_dead_letters(records, dead_letters, max_ratio, replay)
    if line is not None:
        log.error(line, extra={"records": records, "dead_letters": dead_letters})
        raise TooManyDeadLetters()
