"""Headless Debian Chromium driven over the Chrome DevTools protocol (no Selenium, no downloads).

One `Browser` is one chromium process with its own throw-away profile (so each user logs in with
fresh cookies), started in its own session and stopped by its process group id. Chromium resolves
no host but 127.0.0.1 and runs without its background services, so a run sends nothing elsewhere.

The protocol is a websocket of JSON messages: ``{"id", "method", "params"}`` answered by
``{"id", "result"}`` or ``{"id", "error"}``, with events (no ``id``) in between, which we record
only for the page's uncaught errors and console errors.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from websockets.sync.client import ClientConnection, connect

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 900
T = TypeVar("T")

#: Flags that keep chromium quiet: no first-run, sync, update, safe-browsing or metrics traffic,
#: and a resolver that maps every host but the loopback to "not found".
FLAGS = (
    "--headless=new",
    "--no-sandbox",  # we run as root in CI; the sandbox refuses root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--metrics-recording-only",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    f"--window-size={WIDTH},{HEIGHT}",
)


class BrowserError(RuntimeError):
    """The browser could not do what was asked (a script threw, a wait ran out, chromium died)."""


class Browser:
    """One headless chromium with one page; use as a context manager so it always stops."""

    def __init__(self, log_dir: Path, name: str, timeout: float = 20.0) -> None:
        self.name = name
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix=f"ij-chromium-{name}-"))
        self.log = log_dir / f"chromium-{name}.log"
        self.page_errors: list[str] = []
        self._next_id = 0
        self._ws: ClientConnection | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Browser:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        if not CHROMIUM.exists():
            raise BrowserError(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self._proc = subprocess.Popen(
                [str(CHROMIUM), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        port = self._devtools_port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
            targets = json.loads(answer.read())
        page = next(t for t in targets if t["type"] == "page")
        self._ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=5)
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setFocusEmulationEnabled", enabled=True)  # headless has no focused window
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)

    def _devtools_port(self) -> int:
        """Chromium writes the port it picked into the profile once it listens."""
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise BrowserError(f"chromium exited with {self._proc.returncode}; see {self.log}")
            with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)
        raise BrowserError(f"chromium did not open its DevTools port within 20s; see {self.log}")

    def stop(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
            self._ws = None
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=5)
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- protocol ------------------------------------------------------------------------------
    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result, recording the events that arrive meanwhile."""
        if self._ws is None:
            raise BrowserError("the browser is not started")
        self._next_id += 1
        ident = self._next_id
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer within {self.timeout:.0f}s")
            try:
                message = json.loads(self._ws.recv(timeout=left))
            except TimeoutError:
                continue
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return dict(message.get("result", {}))
            self._record(message)

    def _record(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.page_errors.append(str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.page_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))

    # -- page ----------------------------------------------------------------------------------
    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"script threw: {details.get('exception', {}).get('description') or details['text']}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        answer = self.call("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"navigating to {url}: {answer['errorText']}")
        self.wait_until(f"{url} to load", "document.readyState === 'complete'")

    def wait_until(self, what: str, expression: str, timeout: float | None = None) -> None:
        """Poll a JavaScript expression until it is truthy in JavaScript's sense, or `BrowserError` naming `what`."""
        self.wait_for(what, lambda: self._quiet_evaluate(f"!!({expression})") is True, timeout)

    def wait_for(self, what: str, probe: Callable[[], T], timeout: float | None = None) -> T:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {what} (url: {self.url})")
            time.sleep(0.1)

    def _quiet_evaluate(self, expression: str) -> Any:
        """`evaluate`, with a throw (a page between navigations) read as "not yet"."""
        try:
            return self.evaluate(expression)
        except BrowserError:
            return None

    @property
    def url(self) -> str:
        return str(self._quiet_evaluate("location.href"))

    def text(self, selector: str = "body") -> str:
        """The visible text of the first element matching `selector` ('' when there is none)."""
        return str(self.evaluate(f"document.querySelector({json.dumps(selector)})?.innerText ?? ''"))

    def links(self) -> list[dict[str, str]]:
        """Every link on the page: its text and its resolved href."""
        script = "[...document.querySelectorAll('a[href]')].map(a => ({text: a.innerText.trim(), href: a.href}))"
        return list(self.evaluate(script))

    def type_into(self, selector: str, text: str) -> None:
        """Focus a field and type as a user would (React's controlled inputs see real input events)."""
        found = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return false; e.focus(); e.select?.(); return true; })()"
        )
        if not found:
            raise BrowserError(f"no field {selector} on {self.url}")
        self.call("Input.insertText", text=text)

    def grant_clipboard(self) -> None:
        """Let the page read and write the clipboard, as a user who allowed it would."""
        origin = self.evaluate("location.origin")
        self.call(
            "Browser.grantPermissions", origin=origin, permissions=["clipboardReadWrite", "clipboardSanitizedWrite"]
        )

    def click(self, selector: str) -> None:
        """Click the element's centre with the mouse, as a user would (a real user gesture)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        if not box:
            raise BrowserError(f"nothing to click at {selector} on {self.url}")
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=box["x"], y=box["y"])
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"], button="left", clickCount=1)

    def click_text(self, selector: str, text: str) -> None:
        """Click the first element matching `selector` whose visible text is exactly `text`."""
        found = self.evaluate(
            f"(() => {{ const e = [...document.querySelectorAll({json.dumps(selector)})]"
            f".find(e => e.innerText.trim() === {json.dumps(text)}); if (!e) return false;"
            " e.scrollIntoView(); e.click(); return true; })()"
        )
        if not found:
            raise BrowserError(f"nothing to click reading {text!r} ({selector}) on {self.url}")

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key="Enter",
                code="Enter",
                windowsVirtualKeyCode=13,
                text="\r" if kind == "keyDown" else "",
            )

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """A PNG of the viewport (1280x900), or of the whole page height when `full_page`."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = int(self.evaluate("Math.max(document.documentElement.scrollHeight, innerHeight)"))
            params.update(
                captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1}
            )
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
