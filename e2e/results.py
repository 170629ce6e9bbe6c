"""PASS/FAIL lines of an end-to-end runner: each check printed as it is made, the verdict at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Results:
    """Checks made from several threads; ``ok`` only when there was at least one and every one held."""

    say: Callable[[str], None]
    #: How much of what was seen a line shows.
    shown: int = 400
    lines: list[tuple[str, bool, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def expect(self, name: str, held: bool, seen: object) -> None:
        with self.lock:
            self.lines.append((name, bool(held), str(seen)))
        self.say(f"{'PASS' if held else 'FAIL'}  {name}  (seen: {str(seen)[: self.shown]})")

    @property
    def ok(self) -> bool:
        return bool(self.lines) and all(held for _, held, _ in self.lines)


class Deployed(Protocol):
    def stop(self, *, keep_databases: bool = False) -> Iterable[str]: ...


def run_deployed(deployment: Deployed, out: Results, suite: Callable[[], None], *, keep: bool) -> None:
    """Run ``suite`` against a started deployment: an exception is a failed check, the deployment is
    always stopped, then the verdict line (``result: PASS (held/all) in Ns``)."""
    started = time.monotonic()
    try:
        suite()
    except (Exception, KeyboardInterrupt) as exc:
        out.expect("the suite ran to the end", False, f"{type(exc).__name__}: {exc}")
    finally:
        out.say("stopping the deployment")
        for problem in deployment.stop(keep_databases=keep):
            out.say(f"stop: {problem}")
    held = sum(h for _, h, _ in out.lines)
    out.say(f"result: {'PASS' if out.ok else 'FAIL'} ({held}/{len(out.lines)}) in {time.monotonic() - started:.0f}s")
