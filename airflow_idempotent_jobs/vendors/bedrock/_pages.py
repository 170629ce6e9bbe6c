"""A Bedrock listing walked page by page, each page checked to be the API's listing (both lookups use it).

A page counts only when the call answered and holds the listing's key as a list; the walk ends on a
page without ``nextToken``. Anything else is `ProviderOutcomeUnknown` through ``unknown(why)``: a
failed page, a 200 without the list (a gateway's ``{}`` reads like an empty listing), a
``nextToken`` seen before or empty, the walk cut at ``max_pages``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...errors import ProviderOutcomeUnknown
from ._botocore import classify

__all__ = ["pages", "the_one"]


def pages(
    call: Callable[..., Any],
    operation: str,
    key: str,
    query: Mapping[str, Any],
    *,
    since: dt.datetime | None,
    clock_skew: float,
    max_pages: int,
    unknown: Callable[[str], ProviderOutcomeUnknown],
) -> Iterator[tuple[int, list[Any]]]:
    """Each page's number and its list under ``key``, newest first, from ``since`` less ``clock_skew`` (when
    the token's first intent was written: every job of the token is younger); returns after a page
    without ``nextToken``."""
    query = {**query, "sortOrder": "Descending"}
    if since is not None:
        query["submitTimeAfter"] = since - dt.timedelta(seconds=clock_skew)
    seen: set[str] = set()
    after: str | None = None
    for page in range(1, max_pages + 1):
        try:
            answer = call(**query, **({"nextToken": after} if after else {}))
        except Exception as exc:
            raise unknown(f"page {page} failed ({classify(exc, operation)})") from None
        items = answer.get(key) if isinstance(answer, Mapping) else None
        if not isinstance(items, list):
            raise unknown(f"page {page} holds no {key} list: it is not the API's listing")
        yield page, items
        after = answer.get("nextToken")
        if after is None:
            return
        if not isinstance(after, str) or not after or after in seen:
            raise unknown(f"page {page} gives the nextToken {str(after)[:60]!r} again (or an empty one)")
        seen.add(after)
    raise unknown(f"the listing was cut short after {max_pages} pages (max_pages)")


def the_one(
    ours: set[str], page: int, arn: re.Pattern[str], what: str, unknown: Callable[[str], ProviderOutcomeUnknown]
) -> str | None:
    """The one ARN a page names for the token (None: none); two, or one of another form, prove nothing."""
    if len(ours) > 1:
        raise unknown(f"page {page} names {len(ours)} {what}s for one token: {', '.join(sorted(ours)[:3])}")
    if not ours:
        return None
    (found,) = ours
    if not arn.fullmatch(found):
        raise unknown(f"the {what} for this token has an ARN of another form ({found[:120]!r})")
    return found
