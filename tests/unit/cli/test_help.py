"""Help that helps (issue 43): every option of `run` described and in its section, the command
lists showing each command's summary whole."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from hydrator.cli import cli
from hydrator.cli.options import RUN_SECTIONS
from hydrator.formats import FORMAT_NAMES

RUN = cli.commands["run"]


def _help(*args: str, width: int = 100) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=width)
    assert result.exit_code == 0, result.output
    return result.output


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


@pytest.mark.parametrize("option", _options(RUN), ids=lambda o: o.opts[-1])
def test_every_option_of_run_says_what_it_does(option: click.Option) -> None:
    assert option.help and len(option.help) > 15, option.opts


def test_every_option_of_run_is_in_one_section_and_every_name_is_an_option() -> None:
    named = [name for _, names in RUN_SECTIONS for name in names]
    assert len(named) == len(set(named)), "an option in two sections"
    assert set(named) == {p.name for p in _options(RUN)}


def test_run_help_lists_the_sections_in_order_with_no_leftovers() -> None:
    shown = _help("run")
    titles = [f"\n{title}:\n" for title, _ in RUN_SECTIONS]
    places = [shown.index(title) for title in titles]
    assert places == sorted(places)
    assert "Other options" not in shown
    assert "--help" in shown.split(titles[-1])[1]  # last, under the last section
    assert _help("config", "show").count("\nKafka:\n") == 1  # config show takes run's options


def test_the_format_help_names_every_format() -> None:
    (format_option,) = [p for p in _options(RUN) if p.name == "format_"]
    for name in FORMAT_NAMES:
        assert name in str(format_option.help)


@pytest.mark.parametrize("group", [(), ("state",), ("dev",), ("config",), ("dlq",)])
def test_command_lists_show_each_summary_whole(group: tuple[str, ...]) -> None:
    shown = _help(*group, width=80)
    commands = shown.split("Commands:\n", 1)[1]
    assert "..." not in commands, commands
    for line in commands.splitlines():
        assert len(line) <= 80


def test_the_top_level_list_is_one_line_a_command() -> None:
    commands = _help(width=80).split("Commands:\n", 1)[1].strip().splitlines()
    assert [line.split()[0] for line in commands] == sorted(cli.commands)
