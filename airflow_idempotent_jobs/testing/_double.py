"""What the vendors' local doubles share for tests: their switches changed under the lock, their
``GET /_admin/stats`` read the same way, and the count of paid jobs, in all or per token."""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Generic, TypeVar

from ._api_switches import ApiSwitches

__all__ = ["CountedDouble"]

C = TypeVar("C", bound=ApiSwitches)


class CountedDouble(Generic[C]):
    """Mixed into a double that keeps ``lock``, ``config``, ``counters`` (``accepted`` and the per-token
    map `per_token`) and a ``snapshot()`` of what ``/_admin/stats`` shows, read with ``lock`` held."""

    #: The counter mapping each token (or tag) to the paid jobs made for it.
    per_token: ClassVar[str]
    lock: threading.Lock
    config: C
    counters: dict[str, Any]

    def snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    def configure(self, **changes: Any) -> None:
        with self.lock:
            self.config.update(changes)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return self.snapshot()

    def accepted(self, token: str | None = None) -> int:
        """Paid jobs made, in all or for one token."""
        with self.lock:
            if token is None:
                return int(self.counters["accepted"])
            return int(self.counters[self.per_token].get(token, 0))
