"""The request a DAG gives for one message batch, checked before anything is sent, and its tag.

The request is ``{"requests": [{"custom_id": "...", "params": {"model", "max_tokens", "messages",
...}}]}``, the body of ``POST /v1/messages/batches``. Each ``custom_id`` is sent with the batch's
tag in front (`tag_for`: ``ij`` + 20 hex digits of sha256(token) + ``_``), so every result line
names the idempotency token's batch; the API allows 64 characters, so the user's own custom_id may
have at most 41. `strip_tag` gives the user's back.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from ...errors import InvalidRequest
from ..llm_batch import PriceTable, RequestBound

__all__ = ["MAX_CUSTOM_ID", "TAG_PATTERN", "checked_requests", "request_bounds", "strip_tag", "tag_for", "tagged"]

#: The user's custom_id: the API's pattern, shortened by the tag's 23 characters.
MAX_CUSTOM_ID: Final = 41
_CUSTOM_ID: Final = re.compile(rf"[a-zA-Z0-9_-]{{1,{MAX_CUSTOM_ID}}}")
#: A tag as `tag_for` makes it, at the start of a custom_id.
TAG_PATTERN: Final = re.compile(r"ij[0-9a-f]{20}_")
#: The API's own bound on the requests of one batch.
MAX_REQUESTS: Final = 100_000
_WHAT: Final = "anthropic batch request"


def tag_for(idempotency_token: str) -> str:
    """The prefix every custom_id of the token's batch carries."""
    return "ij" + hashlib.sha256(idempotency_token.encode("utf-8")).hexdigest()[:20] + "_"


def strip_tag(custom_id: str) -> str:
    """The user's custom_id: ``custom_id`` without a leading tag (unchanged when it has none)."""
    return custom_id[len(tag_for("")) :] if TAG_PATTERN.match(custom_id) else custom_id


def _refuse(where: str, reason: str) -> InvalidRequest:
    return InvalidRequest(f"{_WHAT}: {where}: {reason} (nothing was sent)")


def checked_requests(request: Mapping[str, Any], prices: PriceTable) -> list[Mapping[str, Any]]:
    """The batch's requests; `InvalidRequest` naming the first bad one (index and field) or
    `InvalidConfiguration` for a model without prices, before anything is sent."""
    if not isinstance(request, Mapping):
        raise _refuse("request", 'must be {"requests": [{"custom_id", "params"}, ...]}')
    unknown = sorted(str(key) for key in request if key != "requests")
    if unknown:
        raise _refuse("request", f"unknown field {unknown[0]!r:.60} (only 'requests')")
    requests = request.get("requests")
    if not isinstance(requests, (list, tuple)) or not requests or len(requests) > MAX_REQUESTS:
        raise _refuse("requests", f"must be a list of 1 to {MAX_REQUESTS} requests")
    seen: set[str] = set()
    for index, one in enumerate(requests):
        where = f"requests[{index}]"
        if not isinstance(one, Mapping) or set(one) != {"custom_id", "params"}:
            raise _refuse(where, "must hold exactly custom_id and params")
        custom_id = one["custom_id"]
        if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
            reason = f"{custom_id!r:.60} is not 1 to {MAX_CUSTOM_ID} characters of a-z A-Z 0-9 _ -"
            raise _refuse(f"{where}.custom_id", f"{reason} (the batch's tag takes 23 of the API's 64)")
        if custom_id in seen:
            raise _refuse(f"{where}.custom_id", f"{custom_id!r} is used twice: custom_ids must be unique")
        seen.add(custom_id)
        _check_params(where, one["params"])
    prices.require(str(one["params"]["model"]) for one in requests)
    return list(requests)


def _check_params(where: str, params: Any) -> None:
    if not isinstance(params, Mapping):
        raise _refuse(f"{where}.params", "must be an object (the Messages API's parameters)")
    model = params.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _refuse(f"{where}.params.model", "must be a model name")
    tokens = params.get("max_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise _refuse(f"{where}.params.max_tokens", f"{tokens!r:.40} is not an integer >= 1")
    messages = params.get("messages")
    if not isinstance(messages, (list, tuple)) or not messages:
        raise _refuse(f"{where}.params.messages", "must be a non-empty list")
    if params.get("stream"):
        raise _refuse(f"{where}.params.stream", "a batch request cannot stream")


def _size(where: str, params: Any) -> int:
    try:
        text = json.dumps(params, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _refuse(f"{where}.params", f"has no JSON form ({exc})") from None
    return len(text.encode("utf-8", "surrogatepass"))


def request_bounds(requests: list[Mapping[str, Any]]) -> list[RequestBound]:
    """What each checked request can cost at most: its model, the UTF-8 size of its params, its max_tokens."""
    return [
        RequestBound(
            str(one["params"]["model"]), _size(f"requests[{i}]", one["params"]), int(one["params"]["max_tokens"])
        )
        for i, one in enumerate(requests)
    ]


def tagged(requests: list[Mapping[str, Any]], idempotency_token: str) -> list[dict[str, Any]]:
    """The requests as sent: each custom_id behind the token's tag."""
    tag = tag_for(idempotency_token)
    return [{"custom_id": tag + str(one["custom_id"]), "params": dict(one["params"])} for one in requests]
