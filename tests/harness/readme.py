"""The commands the README shows, as a new user copies them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"


def readme_commands(section: str, command: str) -> list[str]:
    """The commands of the first bash block under the README's `## <section>` that start with
    `hydrator <command>`, continuation lines joined and comments dropped."""
    text = README.read_text()
    block = text.split(f"## {section}", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [
        re.sub(r"\s+#.*$", "", line).split() for line in block.replace("\\\n", " ").split("\n")
    ]
    return [" ".join(words) for words in lines if words[:2] == ["hydrator", command]]
