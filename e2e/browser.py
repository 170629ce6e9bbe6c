"""Headless Debian Chromium driven by Playwright (its Python package; no browser download).

One `Browser` is one chromium process (Playwright's launch with ``executable_path``) with one page in
a fresh context, so each user logs in with fresh cookies. Chromium resolves no host but 127.0.0.1
and runs without its background services, so a run sends nothing elsewhere. The page's uncaught
errors and console errors are recorded (`Browser.page_errors`) and written to the log file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from playwright.sync_api import Browser as PlaywrightBrowser
from playwright.sync_api import ConsoleMessage, Page, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 900
T = TypeVar("T")

#: Flags that keep chromium quiet: no first-run, sync, update, safe-browsing or metrics traffic,
#: and a resolver that maps every host but the loopback to "not found". (Playwright adds headless,
#: --no-sandbox, which running as root in CI needs, and its own pipe to the browser.)
FLAGS = (
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
    f"--window-size={WIDTH},{HEIGHT}",
)


class BrowserError(RuntimeError):
    """The browser could not do what was asked (a script threw, a wait ran out, chromium died)."""


class Browser:
    """One headless chromium with one page; use as a context manager so it always stops."""

    def __init__(self, log_dir: Path, name: str, timeout: float = 20.0) -> None:
        self.name = name
        self.timeout = timeout
        self.log = log_dir / f"chromium-{name}.log"
        self.page_errors: list[str] = []
        self._playwright: Playwright | None = None
        self._browser: PlaywrightBrowser | None = None
        self._page: Page | None = None

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
        self.log.write_text("")
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=list(FLAGS), timeout=20_000
            )
        except PlaywrightError as exc:
            self.stop()
            raise BrowserError(f"chromium did not start: {exc}") from None
        context = self._browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
        self._page = context.new_page()
        self._page.set_default_timeout(self.timeout * 1000)
        self._page.on("pageerror", lambda error: self._record(f"{error.name}: {error.message}"))
        self._page.on("console", self._console)

    def stop(self) -> None:
        if self._browser is not None:
            try:
                self._browser.close()
            except PlaywrightError:
                pass
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None
        self._page = None

    def _console(self, message: ConsoleMessage) -> None:
        # Playwright also reports the browser's network log ("Failed to load resource: ... 404") as
        # console errors; those are answers the page handles (a 403 for a DAG not readable), not errors.
        if message.type == "error" and not message.text.startswith("Failed to load resource:"):
            self._record(message.text)

    def _record(self, error: str) -> None:
        self.page_errors.append(error)
        with self.log.open("a", encoding="utf-8") as log:
            log.write(error + "\n")

    @property
    def page(self) -> Page:
        if self._page is None:
            raise BrowserError("the browser is not started")
        return self._page

    # -- page ----------------------------------------------------------------------------------
    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        try:
            return self.page.evaluate(expression)
        except PlaywrightError as exc:
            raise BrowserError(f"script threw: {exc.message}") from None

    def goto(self, url: str) -> None:
        try:
            self.page.goto(url, wait_until="load")
        except PlaywrightError as exc:
            raise BrowserError(f"navigating to {url}: {exc.message}") from None
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
        self.page.keyboard.insert_text(text)

    def grant_clipboard(self) -> None:
        """Let the page read and write the clipboard, as a user who allowed it would."""
        origin = self.evaluate("location.origin")
        self.page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)

    def click(self, selector: str) -> None:
        """Click the element's centre with the mouse, as a user would (a real user gesture)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        if not box:
            raise BrowserError(f"nothing to click at {selector} on {self.url}")
        self.page.mouse.click(box["x"], box["y"])

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
        self.page.keyboard.press("Enter")

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """A PNG of the viewport (1280x900), or of the whole page height when `full_page`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=full_page)
        return path
