"""A batch inference job's name and token, derived from the episode's token, and finding the job by them.

**Derivation** (the same on every host and try): ``clientRequestToken`` is the episode's token itself
when it fits the API's pattern (``[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}``, at most 256
characters; the ledger's ``aij-2026-W32-0-<hex>`` does), else ``aij-`` and its sha256 (`request_token`).
The job's name is a prefix (the request's ``jobName``, default ``aij``), ``-`` and the name tag: the
first 32 hex digits of sha256(clientRequestToken) (`job_name`, at most 63 characters).

**The rule** (`find_job`). ListModelInvocationJobs(nameContains=<tag>), newest first, each page
followed by its ``nextToken``; on each page:

* a summary with our ``clientRequestToken`` and a name ending in ``-<tag>``: the job (a page naming two
  such jobs is unknown);
* our token under another name, or a name carrying our tag with another token or none: unknown (a
  copied name, or an API echoing a token that is not the job's), the page is not believed;
* anything else is another's job (ruled out).

None, "no job" (the ledger then submits once), only when every page answered 200 with an
``invocationJobSummaries`` list of readable summaries, and the last had no ``nextToken``, within
``max_pages``. Everything else is `ProviderOutcomeUnknown`: a page that failed or is not the API's
listing (a 200 without the list proves nothing: a gateway's ``{}`` reads like an empty listing), a
``nextToken`` seen before, the walk cut at ``max_pages``. With ``since`` (when the token's first
intent was written) the listing starts at ``since - clock_skew`` (``submitTimeAfter``): every job of
the token is younger.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from ...errors import ProviderOutcomeUnknown
from ._pages import pages, the_one

__all__ = ["DEFAULT_PREFIX", "PREFIX", "find_job", "job_name", "name_tag", "request_token"]

#: What CreateModelInvocationJob accepts as ``clientRequestToken`` (with at most 256 characters).
_TOKEN: Final = re.compile(r"[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}")
#: A job name's prefix: the API's name pattern, short enough for ``-`` and the 32-digit tag (63 in all).
PREFIX: Final = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9+.\-]{0,29}")
DEFAULT_PREFIX: Final = "aij"
#: A job's ARN, as CreateModelInvocationJob answers it.
JOB_ARN: Final = re.compile(r"arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:model-invocation-job/[a-z0-9]{12}")


def request_token(idempotency_token: str) -> str:
    """The episode's token as CreateModelInvocationJob takes it (module docstring)."""
    if len(idempotency_token) <= 256 and _TOKEN.fullmatch(idempotency_token):
        return idempotency_token
    return "aij-" + hashlib.sha256(idempotency_token.encode()).hexdigest()


def name_tag(idempotency_token: str) -> str:
    """32 hex digits of sha256 of the clientRequestToken: what the job's name ends with, and is listed by."""
    return hashlib.sha256(request_token(idempotency_token).encode()).hexdigest()[:32]


def job_name(idempotency_token: str, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>-<tag>``: the job's name for the episode's token (module docstring)."""
    if not PREFIX.fullmatch(prefix):
        raise ValueError(f"job name prefix {prefix!r:.80} does not match {PREFIX.pattern}")
    return f"{prefix}-{name_tag(idempotency_token)}"


def find_job(
    client: Any,
    idempotency_token: str,
    since: dt.datetime | None,
    *,
    clock_skew: float,
    max_pages: int,
    page_size: int,
) -> str | None:
    """The ARN of the token's job; None only when the listing proves there is none (module docstring)."""
    mine, tag = request_token(idempotency_token), name_tag(idempotency_token)
    query = {"nameContains": tag, "maxResults": page_size, "sortBy": "CreationTime"}
    listing = pages(
        client.list_model_invocation_jobs,
        "ListModelInvocationJobs",
        "invocationJobSummaries",
        query,
        since=since,
        clock_skew=clock_skew,
        max_pages=max_pages,
        unknown=_unknown,
    )
    for page, summaries in listing:
        found = _judge(summaries, mine, tag, page)
        if found is not None:
            return found
    return None


def _judge(summaries: list[Any], mine: str, tag: str, page: int) -> str | None:
    """The ARN of our job on this page, None when every summary is another's; else unknown."""
    ours: set[str] = set()
    for index, summary in enumerate(summaries, 1):
        arn = summary.get("jobArn") if isinstance(summary, Mapping) else None
        name = summary.get("jobName") if isinstance(summary, Mapping) else None
        if not isinstance(arn, str) or not isinstance(name, str):
            raise _unknown(f"page {page}, summary {index} is not a job summary (no jobArn or jobName)")
        token = summary.get("clientRequestToken")
        if token == mine and name.endswith("-" + tag):
            ours.add(arn)
        elif token == mine:
            raise _unknown(f"job {arn} carries this token under the name {name[:70]!r}, not one derived from it")
        elif tag in name:
            carries = "no token" if token is None else "another token"
            raise _unknown(f"job {arn} is named for this token ({name[:70]!r}) but carries {carries}")
    return the_one(ours, page, JOB_ARN, "job", _unknown)


def _unknown(why: str) -> ProviderOutcomeUnknown:
    return ProviderOutcomeUnknown(
        f"lookup of the token's batch inference job: {why}: whether a job carries the token is unknown "
        "(nothing is sent; a later retry settles it)"
    )
