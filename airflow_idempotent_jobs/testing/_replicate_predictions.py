"""What the local Replicate double knows of a prediction: its checks, its life, its public shape.

Shaped by Replicate's OpenAPI schema (``schemas_prediction_response``; request bodies with
``additionalProperties: false``; the ``Cancel-After`` header) and its HTTP reference. A prediction
is ``starting`` until its first read, ``processing`` from then, and ends as ``end_as`` says once it
has been read ``polls_to_finish`` times (or is ``seconds_to_finish`` old). It runs
``predict_seconds``; a ``Cancel-After`` lifetime shorter than that cancels it at the lifetime, so
``metrics.predict_time`` never exceeds it. ``aborted`` ends it before it started (no predict time).
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["END_AS", "Prediction", "PredictionRequestError", "check_create", "new_id", "parse_lifetime", "rfc3339"]

#: How a prediction may end.
END_AS: Final = ("succeeded", "failed", "canceled", "aborted")
_MODEL: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION: Final = re.compile(r"(?:([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*):)?([0-9a-f]{64})")
_BODY: Final = frozenset({"input", "webhook", "webhook_completed", "webhook_events_filter", "stream"})
_LIFETIME: Final = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")
#: The model a bare version id belongs to (the double knows no other).
VERSIONED_MODEL: Final = "acme/versioned-model"


class PredictionRequestError(ValueError):
    """A create call the API refuses (422 with the problem's detail, or ``status``)."""

    def __init__(self, detail: str, status: int = 422) -> None:
        super().__init__(detail)
        self.status = status


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_id() -> str:
    """26 lowercase base32 characters, as Replicate's ids look."""
    return base64.b32encode(uuid.uuid4().bytes).decode().lower().rstrip("=")[:26]


def parse_lifetime(text: str) -> float:
    """``Cancel-After``: ``30s``, ``5m``, ``1h30m45s`` or plain seconds; at least 5 seconds."""
    found = _LIFETIME.fullmatch(text.strip()) if text.strip() else None
    if found is None or not any(found.groups()):
        raise PredictionRequestError(f"Cancel-After: {text[:40]!r} is not a duration such as 30s, 5m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total < 5:
        raise PredictionRequestError("Cancel-After: the minimum allowed duration is 5 seconds")
    return float(total)


def check_create(path_model: str | None, body: Any) -> tuple[str, str, dict[str, Any]]:
    """(model, version, input) of a create call, or `PredictionRequestError` as the API would answer."""
    if not isinstance(body, dict):
        raise PredictionRequestError("the request body must be a JSON object")
    allowed = _BODY if path_model is not None else _BODY | {"version"}
    extra = sorted(key for key in body if key not in allowed)
    if extra:
        raise PredictionRequestError(f"Additional property {extra[0]} is not allowed")
    given = body.get("input")
    if not isinstance(given, dict):
        raise PredictionRequestError("input: Invalid type. Expected: object")
    if path_model is not None:
        return path_model, "hidden", given
    version = body.get("version")
    if not isinstance(version, str):
        raise PredictionRequestError("version: is required")
    if _MODEL.fullmatch(version):
        return version, "hidden", given  # an official model by name
    found = _VERSION.fullmatch(version)
    if found is None:
        raise PredictionRequestError(f"version: {version[:80]!r} is not a model or version identifier")
    return found.group(1) or VERSIONED_MODEL, found.group(2), given


@dataclass
class Prediction:
    """One prediction; ``owner`` says who created it (``us``: through the API's create call; ``other``: seeded)."""

    id: str
    model: str
    version: str
    input: dict[str, Any]
    created_at: dt.datetime
    end_as: str = "succeeded"
    predict_seconds: float = 2.5
    lifetime: float | None = None
    owner: str = "us"
    source: str = "api"
    deployment: str | None = None
    status: str = "starting"
    polls: int = 0
    started_at: dt.datetime | None = None
    completed_at: dt.datetime | None = None
    predict_time: float | None = None
    removed: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in END_AS

    def advance(self, now: dt.datetime, pace: tuple[int, int, float | None], polled: bool) -> None:
        """Move on after a read (``polled``: a read of this prediction itself, which counts as a poll).

        ``pace``: the reads it stays ``starting`` for, the reads until it ends, the seconds until it ends.
        """
        if self.terminal:
            return
        starting, polls_to_finish, seconds_to_finish = pace
        self.polls += int(polled)
        age = (now - self.created_at).total_seconds()
        if self.polls >= polls_to_finish or (seconds_to_finish is not None and age >= seconds_to_finish):
            self.finish(now, self.end_as)
        elif self.polls > starting:
            self.status, self.started_at = "processing", self.started_at or now

    def finish(self, now: dt.datetime, outcome: str) -> None:
        if outcome == "aborted":
            self.status, self.started_at, self.completed_at = "aborted", None, now
            return
        ran = self.predict_seconds
        if self.lifetime is not None and self.lifetime < ran:  # the API cancels it at its deadline
            outcome, ran = "canceled", self.lifetime
        self.status, self.completed_at, self.predict_time = outcome, now, ran
        self.started_at = self.started_at or now

    def cancel(self, now: dt.datetime) -> None:
        if not self.terminal:
            ran = 0.0 if self.status == "starting" else self.predict_seconds / 2
            self.status, self.completed_at, self.predict_time = "canceled", now, ran

    def public(self, base_url: str) -> dict[str, Any]:
        """The prediction as ``GET /v1/predictions/{id}`` shows it (``schemas_prediction_response``)."""
        get = f"{base_url}/v1/predictions/{self.id}"
        body: dict[str, Any] = {
            "id": self.id,
            "model": self.model,
            "version": self.version,
            "input": {} if self.removed else dict(self.input),
            "logs": None if self.removed else ("" if self.status == "starting" else "running...\n"),
            "output": None,
            "data_removed": self.removed,
            "error": "CUDA out of memory" if self.status == "failed" else None,
            "source": self.source,
            "status": self.status,
            "created_at": rfc3339(self.created_at),
            "started_at": rfc3339(self.started_at) if self.started_at else None,
            "completed_at": rfc3339(self.completed_at) if self.completed_at else None,
            "urls": {"get": get, "cancel": f"{get}/cancel", "web": f"https://replicate.com/p/{self.id}"},
            "metrics": {},
        }
        if self.status == "succeeded" and not self.removed:
            body["output"] = [f"https://replicate.delivery/xezq/{self.id}/out-0.png"]
        if self.predict_time is not None:
            body["metrics"] = {"predict_time": self.predict_time, "total_time": self.predict_time + 0.25}
        if self.lifetime is not None:
            body["deadline"] = rfc3339(self.created_at + dt.timedelta(seconds=self.lifetime))
        if self.deployment is not None:
            body["deployment"] = self.deployment
        return body
