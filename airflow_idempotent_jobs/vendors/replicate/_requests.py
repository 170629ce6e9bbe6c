"""The request a DAG gives for one Replicate prediction, checked before anything is sent.

``{"model": "owner/name", "input": {...}}`` runs an official model (``POST
/v1/models/{owner}/{name}/predictions``); ``{"version": "<64 hex>" | "owner/name:<64 hex>",
"input": {...}}`` runs a model version (``POST /v1/predictions``). Optional: ``webhook`` (an https
URL) and ``webhook_events_filter``, passed through. Nothing else: the API refuses other body fields
(``additionalProperties: false`` in its OpenAPI schema). The episode's token rides in the input
under ``token_input`` (`body`), so the user's own input may not use that name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...errors import InvalidRequest

__all__ = ["MODEL", "VERSION_ID", "Checked", "Target", "body", "checked_request"]

#: ``owner/name`` as Replicate spells models (letters, digits, ``-``, ``_``, ``.``), never a path trick.
MODEL: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: A model version's id: 64 hex digits.
VERSION_ID: Final = re.compile(r"[0-9a-f]{64}")
_FIELDS: Final = frozenset({"model", "version", "input", "webhook", "webhook_events_filter"})
_EVENTS: Final = frozenset({"start", "output", "logs", "completed"})
_WHAT: Final = "replicate prediction request"


@dataclass(frozen=True)
class Target:
    """What a request runs: the create call's path, the model (``owner/name``) and the version id it names."""

    path: str
    model: str | None
    version: str | None
    #: The ``version`` field as the user gave it (``owner/name:id`` or the id), sent as it is.
    version_field: str | None = None

    @property
    def label(self) -> str:
        if self.version is None:
            return self.model or "?"
        return f"{self.model or '?'}:{self.version[:12]}"


@dataclass(frozen=True)
class Checked:
    """A request that may be sent: its target, the user's input, the optional webhook fields."""

    target: Target
    input: dict[str, Any]
    extra: dict[str, Any]


def _refuse(where: str, reason: str) -> InvalidRequest:
    return InvalidRequest(f"{_WHAT}: {where}: {reason} (nothing was sent)")


def _target(request: Mapping[str, Any]) -> Target:
    model, version = request.get("model"), request.get("version")
    if (model is None) == (version is None):
        raise _refuse("request", 'give either "model": "owner/name" or "version": "<64 hex>" (not both)')
    if model is not None:
        if not isinstance(model, str) or not MODEL.fullmatch(model):
            raise _refuse("model", f"{str(model)[:80]!r} is not owner/name")
        owner, name = model.split("/")
        return Target(f"/v1/models/{owner}/{name}/predictions", model, None)
    text = version if isinstance(version, str) else ""
    named, _, vid = text.rpartition(":")
    if not VERSION_ID.fullmatch(vid) or (named and not MODEL.fullmatch(named)):
        raise _refuse("version", f"{str(version)[:90]!r} is not a 64-hex version id or owner/name:<id>")
    return Target("/v1/predictions", named or None, vid, text)


def checked_request(request: Mapping[str, Any], token_input: str | None) -> Checked:
    """The request's target, input and extras; `InvalidRequest` naming the first bad field."""
    if not isinstance(request, Mapping):
        raise _refuse("request", 'must be {"model" or "version", "input", ...}')
    unknown = sorted(str(key) for key in request if key not in _FIELDS)
    if unknown:
        raise _refuse("request", f"unknown field {unknown[0]!r:.60} (the API refuses other body fields)")
    target = _target(request)
    given = request.get("input")
    if not isinstance(given, Mapping) or not all(isinstance(key, str) for key in given):
        raise _refuse("input", "must be an object of the model's inputs")
    if token_input is not None and token_input in given:
        raise _refuse(f"input.{token_input}", "is reserved for the idempotency token (set token_input to rename it)")
    try:
        json.dumps(given, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _refuse("input", f"has no JSON form ({str(exc)[:120]})") from None
    extra: dict[str, Any] = {}
    webhook = request.get("webhook")
    if webhook is not None:
        if not isinstance(webhook, str) or not re.fullmatch(r"https://[!-~]{1,2000}", webhook):
            raise _refuse("webhook", "must be an https:// URL")
        extra["webhook"] = webhook
    events = request.get("webhook_events_filter")
    if events is not None:
        if not isinstance(events, (list, tuple)) or not events or not set(events) <= _EVENTS:
            raise _refuse("webhook_events_filter", f"must be a list of {sorted(_EVENTS)}")
        extra["webhook_events_filter"] = list(events)
    return Checked(target, dict(given), extra)


def body(checked: Checked, token_input: str | None, token: str) -> dict[str, Any]:
    """The create call's JSON body: the input with the token under ``token_input`` (when set)."""
    sent: dict[str, Any] = {"input": dict(checked.input)}
    if token_input is not None:
        sent["input"][token_input] = token
    if checked.target.version_field is not None:
        sent["version"] = checked.target.version_field
    return {**sent, **checked.extra}
