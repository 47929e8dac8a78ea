"""The live view (`python -m hydrator.live`, the compose stack's websocket app) against the real
broker: the hydrator enriches a stream, the app reads the enriched topic, and headless Chromium
shows the page. Assertions read the rendered table, never a screenshot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.browser import HeadlessChromium, chromium_path
from tests.harness.cdc_events import PLACEHOLDER, ToastTable
from tests.harness.hydrator_process import App, run_to_completion
from tests.harness.topics import produce

pytestmark = pytest.mark.integration

PREVIEW = 160
LISTENING = re.compile(r"live view on (http://[\d.]+:\d+/)")

# The rendered table, as the page shows it: per row its key, op and cells (text and classes).
RENDERED_ROWS = """
Array.from(document.querySelectorAll('#rows tr')).map(tr => ({
  key: tr.dataset.key,
  op: tr.cells[0].textContent,
  cells: Object.fromEntries(Array.from(tr.querySelectorAll('td[data-column]')).map(
    td => [td.dataset.column, {text: td.textContent, classes: td.className.split(' ')}]))
}))
"""


@pytest.fixture
def live_view(app: App, tmp_path: Path) -> Iterator[str]:
    """The live view serving the enriched topic `<app.source>.enriched`; yields its URL."""
    log_path = tmp_path / "live.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hydrator.live",
                "--bootstrap-servers",
                app.bootstrap,
                "--topic",
                f"{app.source}.enriched",
                "--port",
                "0",
                "--preview-chars",
                str(PREVIEW),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            yield _wait_listening(process, log_path)
        finally:
            process.terminate()
            code = process.wait(30)
    assert code == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


def _wait_listening(process: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = LISTENING.search(log_path.read_text())
        if match:
            return match.group(1)
        if process.poll() is not None:
            raise AssertionError(f"live view exited {process.returncode}: {log_path.read_text()}")
        time.sleep(0.1)
    raise AssertionError(f"live view not listening after 60s: {log_path.read_text()}")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[HeadlessChromium]:
    if chromium_path() is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    with HeadlessChromium(tmp_path / "chromium") as chromium:
        yield chromium


def _hydrate(app: App) -> None:
    done = run_to_completion(app.run_args("--available-now", output_suffix=".enriched"))
    assert done.returncode == 0, done.stderr


def _rows(browser: HeadlessChromium) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in browser.evaluate(RENDERED_ROWS)}


def _shows_hydrated(row: dict[str, Any], doc: str) -> None:
    """The TOAST column shows the stored value (abbreviated, with its length), marked filled."""
    cell = row["cells"]["doc"]
    assert cell["text"] == f"{doc[:PREVIEW]}… ({len(doc)} characters)"
    assert "filled" in cell["classes"]


STATUS = "document.getElementById('status')"


def test_page_says_it_waits_for_records_until_the_first_arrives(
    app: App, live_view: str, browser
) -> None:
    app.create_source(2)
    browser.open(live_view)
    browser.wait_for(f"{STATUS}.dataset.state === 'waiting'")
    assert "waiting for records" in browser.evaluate(f"{STATUS}.textContent")
    assert browser.evaluate("document.querySelectorAll('#rows tr').length") == 0

    table = ToastTable(doc_size=3000)
    produce(app.bootstrap, app.source, [table.insert(1)])
    _hydrate(app)
    browser.wait_for(f"{STATUS}.dataset.state === 'live'", timeout_s=60)
    assert "1 rows" in browser.evaluate(f"{STATUS}.textContent")


def test_page_shows_hydrated_rows_and_pushes_changes(app: App, live_view: str, browser) -> None:
    app.create_source(2)
    table = ToastTable(doc_size=3000)
    # inserts with the TOASTed `doc`, then updates that ship it as the placeholder; one delete
    records = [table.insert(k) for k in range(5)]
    records += [table.update(k) for k in range(5)]
    records.append(table.delete(4))
    produce(app.bootstrap, app.source, records)
    _hydrate(app)

    with urllib.request.urlopen(f"{live_view}healthz", timeout=10) as response:
        assert response.read() == b"ok\n"

    browser.open(live_view)
    browser.wait_for("document.querySelectorAll('#rows tr').length === 4")
    rows = _rows(browser)
    assert set(rows) == {f'{{"id":{k}}}' for k in range(4)}  # key 4 was deleted
    for key in range(4):
        row = rows[f'{{"id":{key}}}']
        assert row["op"] == "u"
        assert row["cells"]["n"]["text"] == "1"
        _shows_hydrated(row, table.rows[key]["doc"])
    page_text = browser.evaluate("document.body.innerText")
    assert PLACEHOLDER not in page_text

    # A change hydrated while the page is open arrives over the websocket, no reload.
    produce(app.bootstrap, app.source, [table.update(2), table.update(2), table.insert(9)])
    _hydrate(app)
    browser.wait_for(
        "(() => { const tr = document.querySelector('#rows tr[data-key=\\'{\"id\":2}\\']');"
        " return tr !== null && tr.querySelector('td[data-column=\"n\"]').textContent === '3'; })()"
    )
    rows = _rows(browser)
    assert len(rows) == 5
    _shows_hydrated(rows['{"id":2}'], table.rows[2]["doc"])
    inserted = rows['{"id":9}']["cells"]["doc"]  # shipped in full: nothing to fill
    assert "filled" not in inserted["classes"]
    assert inserted["text"].startswith(table.rows[9]["doc"][:PREVIEW])
    assert browser.evaluate("document.getElementById('status').dataset.state") == "live"
