"""The folder's run tests take `captured` (run_cli.py) as a fixture."""

from tests.unit.cli.run_cli import captured

__all__ = ["captured"]
