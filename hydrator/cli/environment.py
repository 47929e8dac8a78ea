"""`HYDRATOR_*` variables no option reads: a misspelled one would otherwise be ignored silently.
The warning's wording serves the config file's unknown keys too (config_file.py)."""

from __future__ import annotations

from collections.abc import Mapping

import click

from hydrator.names import closest

PREFIX = "HYDRATOR_"
# Read by other programs of the project: the live view (`python -m hydrator.live`) and the tests;
# and by the package's import (HYDRATOR_COMPILED: hydrator/__init__.py).
OTHER_READERS = ("HYDRATOR_LIVE_", "HYDRATOR_TEST_", "HYDRATOR_COMPILED")


def read_variables(command: click.Command) -> set[str]:
    """Every environment variable the options of `command` and its subcommands read."""
    names = {
        envvar
        for param in command.params
        for envvar in ([param.envvar] if isinstance(param.envvar, str) else param.envvar or [])
    }
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= read_variables(sub)
    return names


def unknown_variables(environ: Mapping[str, str], known: set[str]) -> list[str]:
    """The `HYDRATOR_*` names in `environ` that nothing reads, sorted."""
    return sorted(
        name
        for name in environ
        if name.startswith(PREFIX) and name not in known and not name.startswith(OTHER_READERS)
    )


def unknown_variables_warning(environ: Mapping[str, str], known: set[str]) -> str | None:
    """One line naming every unknown variable (never a value: it may be a secret)."""
    unknown = unknown_variables(environ, known)
    if not unknown:
        return None
    ours = {name.removeprefix(PREFIX): name for name in known if name.startswith(PREFIX)}

    def named(name: str) -> str:
        # Compared without the prefix, which every name shares.
        meant = closest(name.removeprefix(PREFIX), ours)
        return f"{name} (did you mean {ours[meant]}?)" if meant is not None else name

    return ignoring_warning([named(name) for name in unknown])


def ignoring_warning(names: list[str], where: str = "") -> str:
    """`Warning: ignoring A, B (did you mean C?)<where>: no option reads them`."""
    them = "it" if len(names) == 1 else "them"
    return f"Warning: ignoring {', '.join(names)}{where}: no option reads {them}"
