"""Finding a token's message batch, when Anthropic offers no metadata and no lookup by anything we choose.

**The rule.** Every custom_id of a batch we create starts with the token's tag (``ij`` + 20 hex
digits of sha256(token) + ``_``), and a batch's results name each request's custom_id. So any one
result line proves whose batch it is. ``find_since(token, since)`` lists batches newest first, back
to ``since - clock_skew`` (``since``: when the ledger wrote the token's first intent; every batch
of that token is younger, give or take the clocks), and judges each batch created since then:

* ended, results readable: the FIRST line's custom_id carries our tag: ours, its id is returned;
  another tag or none: not ours (ruled out);
* ended, results unreadable or gone (archived after 29 days): not ruled out;
* still ``in_progress`` or ``canceling``: its results do not exist yet, so it cannot be ruled out.

None ("no batch carries the token", and the ledger submits once) only when the listing reached an
older batch or its end (``has_more`` false) and every batch in the window was ruled out. Anything
else is `ProviderOutcomeUnknown`, and the ledger sends nothing: a page that fails, is malformed,
out of order (a ``created_at`` newer than the one before, an id twice) or beyond ``max_pages``;
a candidate not ruled out, named with the time by which it ends (24 hours after its creation at
the latest). ``find(token)`` is the same walk with no time bound (the record cannot say when).

**Its cost.** A retry after a lost create answer can only settle once every batch created in the
window (ours, and any other client's on the same workspace) has ended: until then it raises
`ProviderOutcomeUnknown` and nothing is billed; a later retry adopts ours or, with every candidate
another's, submits once. Each ended candidate costs one results request (the first line only).
A batch deleted by someone (``DELETE``) is no longer listed: it cannot be found.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Final

from ...errors import ProviderError, ProviderOutcomeUnknown
from ._requests import tag_for
from ._wire import Batches, BatchInfo, Malformed, parse_line

__all__ = ["Walk", "find_batch"]

#: A batch expires (ends unprocessed) 24 hours after its creation: the latest a candidate ends.
EXPIRY: Final = dt.timedelta(hours=24)


@dataclass
class Walk:
    """What one lookup saw: candidates not ruled out, and why."""

    token: str
    open: list[str] = field(default_factory=list)
    pages: int = 0
    judged: int = 0

    def unknown(self, why: str) -> ProviderOutcomeUnknown:
        return ProviderOutcomeUnknown(
            f"lookup of the token's message batch: {why}: whether a batch carries the token is unknown "
            "(nothing is sent; a later retry settles it)"
        )


def find_batch(
    batches: Batches,
    token: str,
    since: dt.datetime | None,
    *,
    clock_skew: float,
    max_pages: int,
    page_size: int,
) -> str | None:
    """The id of the token's batch, None when every batch since ``since`` is proven another's (module docstring)."""
    walk = Walk(token)
    bound = None if since is None else since - dt.timedelta(seconds=clock_skew)
    tag = tag_for(token)
    seen: set[str] = set()
    newest: dt.datetime | None = None
    after: str | None = None
    while True:
        if walk.pages >= max_pages:
            raise walk.unknown(f"the listing was cut short after {max_pages} pages ({len(seen)} batches)")
        try:
            page = batches.page(after, page_size)
        except Malformed as exc:
            raise walk.unknown(f"page {walk.pages + 1} of the listing is malformed ({exc})") from None
        except ProviderError as exc:
            raise walk.unknown(f"page {walk.pages + 1} of the listing failed ({exc})") from None
        walk.pages += 1
        for info in page.batches:
            if info.id in seen or (newest is not None and info.created_at > newest):
                raise walk.unknown(f"the listing is out of order at batch {info.id} (newest first is documented)")
            seen.add(info.id)
            newest = info.created_at
            if bound is not None and info.created_at < bound:
                _settle(walk)
                return None
            if _judge(batches, info, tag, walk):
                return info.id
        if not page.has_more:
            _settle(walk)
            return None
        after = page.last_id


def _settle(walk: Walk) -> None:
    """Raise when a candidate of the window was not ruled out; else every one was: "no batch"."""
    if walk.open:
        shown = "; ".join(walk.open[:5]) + (f"; and {len(walk.open) - 5} more" if len(walk.open) > 5 else "")
        raise walk.unknown(f"{len(walk.open)} batch(es) in the window cannot be ruled out yet: {shown}")


def _judge(batches: Batches, info: BatchInfo, tag: str, walk: Walk) -> bool:
    """True when ``info`` is the token's batch; else rules it out or records why it cannot be."""
    walk.judged += 1
    if info.status != "ended":
        ends = (info.created_at + EXPIRY).isoformat(timespec="seconds")
        walk.open.append(f"{info.id} is {info.status} (it may be this token's; known once it ends, by {ends})")
        return False
    if info.archived or not info.results_ready:
        walk.open.append(f"{info.id} ended, but its results are gone (archived): it cannot be proven another's")
        return False
    try:
        with batches.results(info.id) as lines:
            first = next(lines, None)
            line = None if first is None else parse_line(first)
    except (Malformed, ProviderError) as exc:
        walk.open.append(f"{info.id} ended, but its results could not be read ({str(exc)[:200]})")
        return False
    if line is None:
        walk.open.append(f"{info.id} ended with no results line")
        return False
    # Another tag, or none, rules it out: a batch of ours carries our tag on every line.
    return line.custom_id.startswith(tag)
