"""Finding a token's prediction, when Replicate offers no idempotency key and no metadata field.

**What the documentation gives** (Replicate's OpenAPI schema, https://api.replicate.com/openapi.json,
and https://replicate.com/docs/reference/http#predictions.list): ``GET /v1/predictions`` lists
every prediction of the token's account, API and web alike, "sorted with the most recent
prediction first", 100 per page, with ``next``/``previous`` cursor URLs and a ``created_after``
filter ("at or after this date-time"). Each object carries ``id``, ``created_at``, ``input`` ("the
prediction input"), ``source`` (``api`` or ``web``), ``deployment`` and ``data_removed``; input,
output and logs "are automatically removed after an hour, by default, for predictions created
through the API". The object has no ``webhook`` field and no metadata of the client's: a token
sent in a webhook URL is never shown back. So the provider puts the token in the input, under
``token_input``; the API "has historically ignored unknown inputs" (replicate/cog#2943), but
whether it shows them back in ``input`` is nowhere documented.

**The rule.** Only positive evidence counts. ``find_since(token, since)`` lists predictions created
since ``since - clock_skew`` (``since``: when the ledger wrote the token's first intent), newest
first, and judges each:

* its input carries ``token_input`` equal to the token: ours, its id is returned;
* its input carries ``token_input`` with another value, or it came from the web (``source: web``)
  or from a deployment: not ours (ruled out; the provider sends through neither);
* anything else cannot be ruled out: input removed (``data_removed``, an hour after creation), or
  an input without ``token_input`` (another client's, or ours if the API dropped the field).

None ("no prediction carries the token": the ledger submits once) only when the listing reached a
prediction older than the window or its last page, and every prediction in the window was ruled
out. Anything else is `ProviderOutcomeUnknown` and nothing is sent: a page that fails or is
malformed, out of order (a ``created_at`` newer than the one before, an id twice, a cursor seen
twice), a walk past ``max_pages``, a candidate not ruled out (named, with why). ``find(token)`` is
the same walk without a time bound (the record cannot say when).

**Its cost.** A retry after a lost answer settles only while our prediction's input is kept (the
first hour) and only if no other client of the account made an API prediction in the window
without the token field; otherwise the submission stays ``unknown`` for the reconcile command.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from urllib.parse import urlencode

from ...errors import ProviderError, ProviderOutcomeUnknown
from ._wire import Malformed, Prediction, Predictions

__all__ = ["Walk", "find_prediction"]


@dataclass
class Walk:
    """What one lookup saw: candidates not ruled out, and why."""

    open: list[str] = field(default_factory=list)
    pages: int = 0
    seen: int = 0

    def unknown(self, why: str) -> ProviderOutcomeUnknown:
        return ProviderOutcomeUnknown(
            f"lookup of the token's prediction: {why}: whether a prediction carries the token is unknown "
            "(nothing is sent)"
        )


def _rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def find_prediction(
    predictions: Predictions,
    token: str,
    since: dt.datetime | None,
    *,
    token_input: str,
    clock_skew: float,
    max_pages: int,
) -> str | None:
    """The id of the token's prediction; None when every one since ``since`` is proven another's (module docstring)."""
    walk = Walk()
    bound = None if since is None else since - dt.timedelta(seconds=clock_skew)
    query = None if bound is None else urlencode({"created_after": _rfc3339(bound)})
    ids: set[str] = set()
    queries: set[str | None] = {query}
    newest: dt.datetime | None = None
    while True:
        if walk.pages >= max_pages:
            raise walk.unknown(f"the listing was cut short after {max_pages} pages ({walk.seen} predictions)")
        try:
            page = predictions.page(query)
        except Malformed as exc:
            raise walk.unknown(f"page {walk.pages + 1} of the listing is malformed ({exc})") from None
        except ProviderError as exc:
            raise walk.unknown(f"page {walk.pages + 1} of the listing failed ({exc})") from None
        walk.pages += 1
        for one in page.predictions:
            if one.id in ids or (newest is not None and one.created_at > newest):
                raise walk.unknown(f"the listing is out of order at {one.id} (newest first is documented)")
            ids.add(one.id)
            newest = one.created_at
            walk.seen += 1
            if bound is not None and one.created_at < bound:
                _settle(walk)
                return None
            if _judge(one, token, token_input, walk):
                return one.id
        if page.next_query is None:
            _settle(walk)
            return None
        if page.next_query in queries:
            raise walk.unknown(f"the listing's next page repeats an earlier one ({page.next_query[:80]!r})")
        queries.add(page.next_query)
        query = page.next_query


def _settle(walk: Walk) -> None:
    """Raise when a prediction of the window was not ruled out; else every one was: "no prediction"."""
    if walk.open:
        shown = "; ".join(walk.open[:5]) + (f"; and {len(walk.open) - 5} more" if len(walk.open) > 5 else "")
        raise walk.unknown(f"{len(walk.open)} prediction(s) in the window cannot be ruled out: {shown}")


def _judge(one: Prediction, token: str, token_input: str, walk: Walk) -> bool:
    """True when ``one`` is the token's prediction; else rules it out or records why it cannot be."""
    if one.input is not None and token_input in one.input:
        return bool(one.input[token_input] == token)  # another token's value rules it out
    if one.source == "web":
        return False
    if one.deployment is not None:
        return False
    if one.data_removed or one.input is None:
        walk.open.append(f"{one.id} ({one.model or '?'}) has its input removed: it may be this token's")
    else:
        walk.open.append(f"{one.id} ({one.model or '?'}) has no {token_input} in its input: it may be this token's")
    return False
