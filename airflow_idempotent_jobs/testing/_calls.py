"""One adapter call, bounded in time, and how the report writes what came out of it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..paid.results import clean_text

__all__ = ["Outcome", "call", "class_names"]

#: Characters of an exception's text quoted in the report.
_QUOTED = 160


@dataclass(frozen=True)
class Outcome:
    """What one call returned or raised, or that it did not end in time."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    seconds: float = 0.0

    def text(self, redact: Callable[[str], str]) -> str:
        """``returned 'job-1'`` / ``raised ProviderRejected ("...")`` / ``did not return within 60 s``."""
        if self.timed_out:
            return f"did not return within {self.seconds:g} s"
        if self.error is None:
            return f"returned {clean_text(repr(self.value), redact, _QUOTED)}"
        message = " ".join(str(self.error).split())
        quoted = f' ("{clean_text(message, redact, _QUOTED)}")' if message else ""
        return f"raised {type(self.error).__name__}{quoted}"


def call(fn: Callable[..., Any], *args: Any, timeout: float) -> Outcome:
    """``fn(*args)`` on a daemon thread, waited for at most ``timeout`` seconds.

    A thread, so that an adapter without a read timeout costs the kit one bounded wait, not a hang.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # the adapter's own, whatever it is: the kit judges it
            box["error"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=run, name="conformance-call", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return Outcome(timed_out=True, seconds=timeout)
    return Outcome(box.get("value"), box.get("error"), seconds=time.monotonic() - started)


def class_names(classes: tuple[type[BaseException], ...]) -> str:
    return " or ".join(cls.__name__ for cls in classes)
