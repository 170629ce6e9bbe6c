"""The one doubling backoff: HTTP connect retries, blocking polls and the trigger's polls use it."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["doubling"]

#: What a zero delay grows to: a retry loop that starts at 0 must still back off, never spin.
FLOOR = 0.01


def doubling(initial: float, maximum: float) -> Iterator[float]:
    """``initial``, then twice the last delay, up to ``maximum``; endless (the caller bounds the loop).

    A delay of 0 is followed by `FLOOR` (capped by ``maximum`` too), so ``initial=0`` means "retry
    at once, then back off", and ``maximum=0`` means "never wait". Negative values count as 0.
    """
    delay = max(initial, 0.0)
    ceiling = max(maximum, 0.0)
    while True:
        yield delay
        delay = min(delay * 2 if delay > 0 else FLOOR, ceiling)
