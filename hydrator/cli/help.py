"""`--help` that lists a command's options in sections (Kafka, format, state, ...).

The sections are a table of option names beside the command (options.py's RUN_SECTIONS), so an
option is declared where it always was and only named here; an option no section names is
listed under "Other options" (tests/unit/cli/test_help.py asks that every option of `run` has its
section and its description).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

# (title, the parameter names it lists, in that order)
Sections = Sequence[tuple[str, Sequence[str]]]


class SectionedCommand(click.Command):
    """A command whose --help lists its options under `sections`."""

    def __init__(self, *args: object, sections: Sections = (), **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: dict[str, tuple[str, str]] = {}
        help_row = None
        for param in self.get_params(ctx):
            row = param.get_help_record(ctx)
            if row is None:
                continue
            if param is self.get_help_option(ctx):
                help_row = row  # --help: last, under the last section
            else:
                rows[param.name or ""] = row
        groups = [
            (title, [rows.pop(name) for name in names if name in rows])
            for title, names in self.sections
        ]
        groups.append(("Other options", list(rows.values())))
        groups = [(title, listed) for title, listed in groups if listed]
        if help_row is not None:
            if groups:
                groups[-1][1].append(help_row)
            else:
                groups.append(("Options", [help_row]))
        for title, listed in groups:
            with formatter.section(title):
                formatter.write_dl(listed)


def sectioned(sections: Sections) -> type[SectionedCommand]:
    """The command class for `@click.command(cls=...)` with these sections."""

    class Command(SectionedCommand):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, sections=sections, **kwargs)

    return Command


class HydratorGroup(click.Group):
    """A command group whose command list shows each command's short help, or else the first
    sentence of its help, whole: click cuts it to fit one line, mid-sentence."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.short_help or first_sentence(command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def first_sentence(text: str) -> str:
    """The help's first sentence (up to a full stop followed by a space or the end)."""
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]
