"""Finding an async invocation by its ``clientRequestToken``: ListAsyncInvokes, the second line of defence.

Bedrock honours the token, but AWS does not say for how long it remembers one: a task cleared the
next day would pay again if the token were forgotten. So a retry first lists the invocations
submitted since the token's first intent (``submitTimeAfter`` = intent - ``clock_skew``; without a
time, every invocation), newest first, each page followed by its ``nextToken`` (`_pages`):

* a summary carrying our token: the invocation (two of them on a page: unknown);
* a summary carrying another token: another's, ruled out;
* a summary carrying none (a call without a token, or an API that leaves the field out): it cannot
  be ruled out, so the listing proves nothing.

None, "no invocation", only when every page was the API's listing and every summary was ruled out;
anything else is `ProviderOutcomeUnknown`. Either way the ledger then resends the same token (which
the API honours while it remembers it): the lookup only ever adds an adoption.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, Final

from ...errors import ProviderOutcomeUnknown
from ._pages import pages, the_one

__all__ = ["INVOCATION_ARN", "find_invocation"]

#: An invocation's ARN, as StartAsyncInvoke answers it.
INVOCATION_ARN: Final = re.compile(r"arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:async-invoke/[a-z0-9]{1,128}")


def find_invocation(
    client: Any, token: str, since: dt.datetime | None, *, clock_skew: float, max_pages: int, page_size: int
) -> str | None:
    """The ARN of the invocation made with ``token`` (as sent); None only when the listing proves none."""
    query = {"maxResults": page_size, "sortBy": "SubmissionTime"}
    listing = pages(
        client.list_async_invokes,
        "ListAsyncInvokes",
        "asyncInvokeSummaries",
        query,
        since=since,
        clock_skew=clock_skew,
        max_pages=max_pages,
        unknown=_unknown,
    )
    for page, summaries in listing:
        ours = set()
        for index, summary in enumerate(summaries, 1):
            arn = summary.get("invocationArn") if isinstance(summary, Mapping) else None
            if not isinstance(arn, str):
                raise _unknown(f"page {page}, summary {index} is not an invocation summary (no invocationArn)")
            carried = summary.get("clientRequestToken")
            if carried == token:
                ours.add(arn)
            elif not isinstance(carried, str) or not carried:
                raise _unknown(f"invocation {arn[:120]} carries no token: it cannot be ruled out")
        found = the_one(ours, page, INVOCATION_ARN, "invocation", _unknown)
        if found is not None:
            return found
    return None


def _unknown(why: str) -> ProviderOutcomeUnknown:
    return ProviderOutcomeUnknown(f"lookup of the token's async invocation: {why}: whether one carries it is unknown")
