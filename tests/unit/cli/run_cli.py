"""`hydrator run` driven in-process, for the CLI's unit tests: the smallest valid command line
and an invoker that lets exceptions through (the fixture that stops before any engine runs is
`captured`, in conftest.py)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from hydrator import cli

BASE = [
    "run",
    "--engine",
    "embedded",
    "--bootstrap-servers",
    "h:1",
    "--input-topic",
    "t",
    "--output-suffix",
    ".e",
]


def invoke(args: list[str], env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli.cli, args, env=env, catch_exceptions=False)
