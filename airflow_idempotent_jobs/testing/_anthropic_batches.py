"""What the local Anthropic double knows of a message batch: its checks, its clock, its usage, its results.

The usage is a pure function of the request (`usage_for`), so that a test computes the expected cost
on its own from the same rule:

* ``words(x)``: the whitespace-separated words of every text in ``x`` (a string, or content blocks
  with ``"text"``);
* ``input_tokens = words(messages) + 3``;
* ``output_tokens = min(max_tokens, words(messages) + 5)``;
* a ``system`` text: its words are ``cache_creation_input_tokens`` for the first request of the batch
  that carries that text, and ``cache_read_input_tokens`` for every later one (zero without system).
"""

from __future__ import annotations

import datetime as dt
import random
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["OUTCOMES", "Batch", "BatchRequestError", "check_create", "rfc3339", "usage_for", "words"]

#: How a request of an ended batch may end (the ``result.type`` of its line).
OUTCOMES: Final = ("succeeded", "errored", "canceled", "expired")
CUSTOM_ID: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: The API keeps results for 29 days; a batch expires 24 hours after its creation.
EXPIRES_AFTER: Final = dt.timedelta(hours=24)


class BatchRequestError(ValueError):
    """A create call the API refuses with 400 ``invalid_request_error``."""


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(words(item) for item in value)
    if isinstance(value, dict):
        return words(value.get("content")) + words(value.get("text"))
    return 0


def usage_for(params: Mapping[str, Any], system_seen: set[str]) -> dict[str, int]:
    """The usage of one succeeded request (see the module docstring); adds its system text to ``system_seen``."""
    asked = words(params.get("messages"))
    system = params.get("system")
    key = repr(system)
    cached = words(system) if system else 0
    first = bool(system) and key not in system_seen
    if system:
        system_seen.add(key)
    return {
        "input_tokens": asked + 3,
        "output_tokens": min(int(params["max_tokens"]), asked + 5),
        "cache_creation_input_tokens": cached if first else 0,
        "cache_read_input_tokens": 0 if first else cached,
    }


def check_create(body: Any) -> list[dict[str, Any]]:
    """The requests of a create call, or `BatchRequestError` naming what the API would refuse."""
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        raise BatchRequestError("requests: must be a non-empty list")
    seen: set[str] = set()
    for index, one in enumerate(requests):
        where = f"requests.{index}"
        if not isinstance(one, dict) or set(one) != {"custom_id", "params"}:
            raise BatchRequestError(f"{where}: must hold exactly custom_id and params")
        custom_id, params = one["custom_id"], one["params"]
        if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
            raise BatchRequestError(f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if custom_id in seen:
            raise BatchRequestError(f"{where}.custom_id: duplicate custom_id {custom_id!r}")
        seen.add(custom_id)
        if not isinstance(params, dict) or not isinstance(params.get("model"), str) or not params["model"]:
            raise BatchRequestError(f"{where}.params.model: Field required")
        tokens = params.get("max_tokens")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise BatchRequestError(f"{where}.params.max_tokens: must be an integer >= 1")
        if not isinstance(params.get("messages"), list) or not params["messages"]:
            raise BatchRequestError(f"{where}.params.messages: must be a non-empty list")
    return requests


@dataclass
class Batch:
    """One message batch; ``outcomes`` says how each request ends, ``owner`` who created it."""

    id: str
    created_at: dt.datetime
    requests: list[dict[str, Any]]
    outcomes: list[str]
    owner: str = "us"
    polls: int = 0
    status: str = "in_progress"
    ended_at: dt.datetime | None = None
    cancel_initiated_at: dt.datetime | None = None
    archived_at: dt.datetime | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def new(cls, requests: list[dict[str, Any]], outcomes: list[str], at: dt.datetime, owner: str = "us") -> Batch:
        cycle = [outcomes[i % len(outcomes)] for i in range(len(requests))]
        return cls("msgbatch_" + uuid.uuid4().hex[:24], at, requests, cycle, owner)

    def end(self, at: dt.datetime, canceled: bool = False) -> None:
        """End processing: one result line per request, shuffled (the API gives no order)."""
        system_seen: set[str] = set()
        self.lines = []
        for one, outcome in zip(self.requests, self.outcomes, strict=True):
            outcome = "canceled" if canceled else outcome
            self.lines.append({"custom_id": one["custom_id"], "result": _result(one["params"], outcome, system_seen)})
        random.Random(self.id).shuffle(self.lines)
        self.status, self.ended_at = "ended", at

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("processing", *OUTCOMES), 0)
        if self.status != "ended":
            counts["processing"] = len(self.requests)
        for line in self.lines:
            counts[line["result"]["type"]] += 1
        return counts

    def public(self, base_url: str) -> dict[str, Any]:
        """The batch as ``GET /v1/messages/batches/{id}`` shows it (``MessageBatch``)."""
        ended = self.status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": self.counts(),
            "created_at": rfc3339(self.created_at),
            "ended_at": rfc3339(self.ended_at) if self.ended_at else None,
            "expires_at": rfc3339(self.created_at + EXPIRES_AFTER),
            "cancel_initiated_at": rfc3339(self.cancel_initiated_at) if self.cancel_initiated_at else None,
            "archived_at": rfc3339(self.archived_at) if self.archived_at else None,
            "results_url": f"{base_url}/v1/messages/batches/{self.id}/results" if ended else None,
        }


def _result(params: Mapping[str, Any], outcome: str, system_seen: set[str]) -> dict[str, Any]:
    if outcome == "errored":
        error = {"type": "invalid_request_error", "message": "the model refused this request"}
        return {"type": "errored", "error": {"type": "error", "error": error}}
    if outcome != "succeeded":
        return {"type": outcome}
    usage = usage_for(params, system_seen)
    message = {
        "id": "msg_" + uuid.uuid4().hex[:24],
        "type": "message",
        "role": "assistant",
        "model": params["model"],
        "content": [{"type": "text", "text": "ok " * usage["output_tokens"]}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    return {"type": "succeeded", "message": message}
