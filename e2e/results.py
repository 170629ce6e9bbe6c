"""PASS/FAIL lines of an end-to-end runner: each check printed as it is made, the verdict at the end."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


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
