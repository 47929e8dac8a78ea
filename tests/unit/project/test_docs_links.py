"""The README stays a front page, and the documentation's relative links stay live: every link
in README.md, docs/*.md and bench/README.md to a file points at one that exists, and a link to a
heading (`file.md#heading`, `#heading`) at a heading that exists, slugged as GitHub does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README_MAX_LINES = 250

# [text](target) outside code; images too. The target ends at whitespace or ")".
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench/README.md"]


def _prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def _links(path: Path) -> list[str]:
    """Link targets; a link's text may wrap onto the next line."""
    prose = "\n".join(_INLINE_CODE.sub("", line) for line in _prose_lines(path))
    return _LINK.findall(prose)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _prose_lines(path):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def _is_external(target: str) -> bool:
    return re.match(r"^[a-z][a-z0-9+.-]*:", target) is not None  # http:, https:, mailto:...


def test_slug_follows_github() -> None:
    assert slug("Worker processes: `--workers N`") == "worker-processes---workers-n"
    assert slug("The demo: `hydrator demo`") == "the-demo-hydrator-demo"
    assert slug("Log lines: `--log-format text|json`") == "log-lines---log-format-textjson"
    assert slug("On Tansu") == "on-tansu"


def test_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_gives_the_two_commands_and_the_venv() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
    assert ". .venv/bin/activate" in text
    # CI runs what the README says it does
    assert "make test" in (ROOT / ".ci/run").read_text(encoding="utf-8")


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in _links(document):
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)
