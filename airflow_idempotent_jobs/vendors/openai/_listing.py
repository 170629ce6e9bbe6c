"""Finding a token's batch by listing every batch, newest first: "no batch" only when the listing proves it.

OpenAI lists batches page by page (``after`` = the last id seen), newest first, with no filter;
a batch's ``metadata`` carries the token. "None" is returned only when the listing has covered
every batch that can carry the token: it reached a batch created before the ``floor`` (the token's
first intent, less the clocks' skew), or its end (``has_more`` false). Anything else proves nothing
(`ProviderOutcomeUnknown`): a page cut short by ``max_pages``, an error, a page that is not the
API's answer (no ``object: list``, ``data`` not a list of batches, ``has_more`` not a boolean,
``last_id`` not its last batch), a batch id seen twice, batches out of order, a ``created_at``
that is no plausible Unix time (``1e999``, text, a bool), a metadata value that is not text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ...errors import ProviderOutcomeUnknown

__all__ = ["Page", "parse_page", "scan"]

#: A Unix time after this (year 2286) is no batch's creation time.
_LATEST: Final = 10_000_000_000


class _Unreadable(ValueError):
    """A page that is not the API's answer."""


@dataclass(frozen=True)
class Item:
    id: str
    created_at: int
    metadata: dict[str, str]


@dataclass(frozen=True)
class Page:
    items: tuple[Item, ...]
    has_more: bool


def _no_constant(name: str) -> Any:
    raise _Unreadable(f"{name} is not JSON")


def parse_page(content: bytes) -> Page:
    """One listing page, checked strictly; `_Unreadable` (a ValueError) naming what is wrong."""
    try:
        page = json.loads(content, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _Unreadable(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(page, dict) or page.get("object") != "list" or not isinstance(page.get("data"), list):
        raise _Unreadable('not a list page ({"object": "list", "data": [...]})')
    has_more = page.get("has_more")
    if not isinstance(has_more, bool):
        raise _Unreadable(f"has_more is {has_more!r:.40}, not a boolean")
    items = tuple(_item(raw, index) for index, raw in enumerate(page["data"]))
    if has_more and not items:
        raise _Unreadable("an empty page that says it has more")
    for name, item in (("first_id", items[0] if items else None), ("last_id", items[-1] if items else None)):
        given = page.get(name)
        if given is not None and (item is None or given != item.id):
            raise _Unreadable(f"{name} {given!r:.80} is not the page's {name.split('_')[0]} batch")
    return Page(items, has_more)


def _item(raw: Any, index: int) -> Item:
    if not isinstance(raw, dict) or raw.get("object") != "batch":
        raise _Unreadable(f"data[{index}] is not a batch")
    batch_id, created_at, metadata = raw.get("id"), raw.get("created_at"), raw.get("metadata")
    if not isinstance(batch_id, str) or not batch_id or len(batch_id) > 512:
        raise _Unreadable(f"data[{index}].id is not a batch id")
    if isinstance(created_at, bool) or not isinstance(created_at, int) or not 0 < created_at < _LATEST:
        raise _Unreadable(f"data[{index}].created_at {created_at!r:.40} is not a plausible Unix time")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _Unreadable(f"data[{index}].metadata is not a map of strings")
    return Item(batch_id, created_at, metadata)


def scan(
    fetch: Callable[[str | None], bytes], key: str, token: str, floor: int | None, max_pages: int, what: str
) -> str | None:
    """The id of the newest batch whose ``metadata[key]`` is ``token``, or None when the listing proves there is none.

    ``fetch(after)`` returns one page's body (raising `ProviderOutcomeUnknown` when it cannot);
    ``floor``: a batch created before it cannot carry the token (None: list to the end).
    """
    after: str | None = None
    seen: set[str] = set()
    newest_allowed: int | None = None
    for number in range(1, max_pages + 1):
        content = fetch(after)
        try:
            page = parse_page(content)
        except _Unreadable as exc:
            raise ProviderOutcomeUnknown(f"{what}: page {number} of the batch listing is unreadable: {exc}") from None
        for item in page.items:
            if item.id in seen:
                raise ProviderOutcomeUnknown(f"{what}: batch {item.id} listed twice: the listing cannot be followed")
            if newest_allowed is not None and item.created_at > newest_allowed:
                raise ProviderOutcomeUnknown(f"{what}: the listing is out of order at batch {item.id} (page {number})")
            seen.add(item.id)
            newest_allowed = item.created_at
            if item.metadata.get(key) == token:
                return item.id
            if floor is not None and item.created_at < floor:
                return None  # every batch newer than the floor has been seen
        if not page.has_more:
            return None
        after = page.items[-1].id
    raise ProviderOutcomeUnknown(
        f"{what}: {max_pages} pages of batches listed without reaching the token's time or the listing's end: "
        "nothing is proven (raise max_pages)"
    )
