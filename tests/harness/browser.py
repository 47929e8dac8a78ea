"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol, so a test
can open a page and read what it renders, as a person would see it, without screenshots."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from websockets.sync.client import ClientConnection, connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    return next((p for c in CANDIDATES if (p := shutil.which(c))), None)


class BrowserError(RuntimeError):
    pass


class HeadlessChromium:
    def __init__(self, profile_dir: Path, start_timeout_s: float = 60) -> None:
        executable = chromium_path()
        if executable is None:
            raise BrowserError(f"none of {', '.join(CANDIDATES)} is on PATH")
        self.executable = executable
        self.profile_dir = profile_dir
        self.start_timeout_s = start_timeout_s
        self._ids = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: ClientConnection | None = None
        self._closing = contextlib.ExitStack()

    def __enter__(self) -> HeadlessChromium:
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.executable,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-port=0",  # the port chosen is written to DevToolsActivePort
            f"--user-data-dir={self.profile_dir}",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self._log = open(self.profile_dir / "chromium.log", "wb")
        self._process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._socket = self._closing.enter_context(
                connect(self._page_socket_url(), max_size=None, open_timeout=30)
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _page_socket_url(self) -> str:
        port_file = self.profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise BrowserError(f"chromium exited {self._process.returncode}: {self._output()}")
            if port_file.exists() and port_file.read_text().strip():
                port = port_file.read_text().split()[0]
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                    targets = json.load(r)
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.2)
        raise BrowserError(f"chromium not ready within {self.start_timeout_s}s: {self._output()}")

    def _output(self) -> str:
        self._log.flush()
        return (self.profile_dir / "chromium.log").read_text(errors="replace")[-2000:]

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.close()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._log.close()

    def call(self, method: str, timeout_s: float = 30, **params: Any) -> dict[str, Any]:
        """One DevTools command; events arriving meanwhile are skipped."""
        assert self._socket is not None
        request_id = next(self._ids)
        self._socket.send(json.dumps({"id": request_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"no answer to {method} within {timeout_s}s")
            answer = json.loads(self._socket.recv(timeout=remaining))
            if answer.get("id") != request_id:
                continue
            if "error" in answer:
                raise BrowserError(f"{method}: {answer['error']}")
            return dict(answer.get("result", {}))

    def open(self, url: str, timeout_s: float = 30) -> None:
        """Navigate to `url` and return once its document has loaded (Page.navigate answers
        before: the old document, or none, would be evaluated)."""
        self.evaluate("window.__left = true")
        self.call("Page.navigate", url=url)
        self.wait_for("!window.__left && document.readyState === 'complete'", timeout_s)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30) -> Any:
        """Evaluate until the expression gives a truthy value; returns it."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} still falsy after {timeout_s}s")
            time.sleep(0.2)
