"""`ReplicatePredictionProvider`: one Replicate prediction per episode, through the ``replicate`` SDK (1.0.x).

The request (`_requests`) is ``{"model": "owner/name", "input": {...}}`` or ``{"version": "<id>",
"input": {...}}``, checked and priced before anything is sent. The create call is made once: the
SDK's ``RetryTransport`` never retries a POST, and nothing here does (`_classify`). Replicate has
no idempotency key, so the token rides in the input under ``token_input`` and a retry after a lost
answer looks it up in the listing (capability (b), `lookup`: what that listing can prove, and what
it cannot). ``token_input=None`` sends the input untouched and declares no lookup: capability (c),
every lost answer goes to ``idempotent-jobs reconcile``.

``status`` maps ``starting`` to pending, ``processing`` to running, ``succeeded`` to succeeded and
``failed``/``canceled``/``aborted`` to failed; a terminated prediction's cost is its
``metrics.predict_time`` at the configured price (`_prices`). The result holds the prediction's id,
status, model, version, times, ``predict_time`` and, once succeeded, its ``output`` (file URLs,
which the API removes after an hour: copy them downstream).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx
from replicate.client import Client

from ...errors import InvalidConfiguration, InvalidRequest, ProviderOutcomeUnknown, ProviderRejected
from ...paid._redaction import Redactor
from ...paid.provider import ProviderCapabilities, RemoteState, RemoteStatus, reported_cost
from ...paid.results import redacting
from ._form import DEFAULT_BASE_URL
from ._prices import PriceTable
from ._requests import Checked, body, checked_request
from ._wire import BoundedRetryAfter, Prediction, Predictions
from .lookup import find_prediction

__all__ = ["DEFAULT_BASE_URL", "TOKEN_INPUT", "ReplicatePredictionProvider", "normal_base_url"]

#: The input field that carries the episode's token (module docstring).
TOKEN_INPUT: Final = "idempotency_token"
_WHAT: Final = "replicate provider"
_STATES: Final = {
    "starting": RemoteState.PENDING,
    "processing": RemoteState.RUNNING,
    "succeeded": RemoteState.SUCCEEDED,
    "failed": RemoteState.FAILED,
    "canceled": RemoteState.FAILED,
    "aborted": RemoteState.FAILED,
}


def normal_base_url(base_url: object) -> str:
    """``base_url`` without a trailing ``/`` or ``/v1`` (the SDK adds ``/v1``); else `InvalidConfiguration`."""
    if not isinstance(base_url, str) or not base_url.startswith(("https://", "http://")) or len(base_url) > 2000:
        raise InvalidConfiguration(_WHAT, "base_url", "must be an http(s) URL such as https://api.replicate.com")
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _number(name: str, value: object, low: float, high: float, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidConfiguration(_WHAT, name, f"must be a number from {low:g} to {high:g}")
    if integer and not isinstance(value, int):
        raise InvalidConfiguration(_WHAT, name, "must be an integer")
    return float(value)


class ReplicatePredictionProvider:
    """A `PaidProvider` for Replicate predictions (module docstring).

    ``api_token``: the account's API token (never read from the environment). ``prices``: per
    model or version (`_prices.PriceTable`). ``base_url``: the API (``/v1`` is added by the SDK; a
    trailing ``/v1`` is dropped). ``timeout``: seconds for each call. ``token_input``: the input
    field that carries the token, None for no lookup. ``clock_skew``: seconds the API's clock may
    differ from ours (the lookup's window starts that much before the intent). ``max_pages``: how
    far a lookup lists (100 predictions a page) before it gives up (`ProviderOutcomeUnknown`).
    """

    def __init__(
        self,
        *,
        api_token: str,
        prices: PriceTable | Mapping[str, Any],
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 30.0,
        token_input: str | None = TOKEN_INPUT,
        clock_skew: float = 300.0,
        max_pages: int = 20,
    ) -> None:
        if not isinstance(api_token, str) or not api_token.strip() or not api_token.isprintable():
            raise InvalidConfiguration(_WHAT, "api_token", "must be a non-empty text (the environment is not read)")
        if token_input is not None and (not isinstance(token_input, str) or not token_input.isidentifier()):
            raise InvalidConfiguration(_WHAT, "token_input", "must be an input name (letters, digits, _) or None")
        self.prices = PriceTable.parse(prices)
        self.base_url = normal_base_url(base_url)
        self.timeout = _number("timeout", timeout, 0.1, 3600.0)
        self.clock_skew = _number("clock_skew", clock_skew, 0.0, 86400.0)
        self.max_pages = int(_number("max_pages", max_pages, 1, 10_000, integer=True))
        self.token_input = token_input
        self._token = api_token
        self._redactor = Redactor([api_token])
        self._built: tuple[int, Predictions] | None = None
        self.capabilities = ProviderCapabilities(idempotent_tokens=False, lookup=token_input is not None)
        #: The most a request can cost, only when every price has a bound (`_prices`); else None
        #: (no honest worst case: the operator then counts ``estimated_cost`` if one is given).
        self.worst_case: Callable[[Mapping[str, Any]], float] | None = self._worst_case if self.prices.bounded else None

    def __repr__(self) -> str:
        return f"ReplicatePredictionProvider(base_url={self.base_url!r}, prices={sorted(self.prices.prices)})"

    def _api(self) -> Predictions:
        """The SDK client of this process (a forked child builds its own connections)."""
        if self._built is None or self._built[0] != os.getpid():
            client = Client(
                api_token=self._token,
                base_url=self.base_url,
                timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                transport=BoundedRetryAfter(),
            )
            self._built = (os.getpid(), Predictions(client))
        return self._built[1]

    def redact(self, text: str) -> str:
        """``text`` without the API token, in any form."""
        return self._redactor.text(text)

    def billing_identity(self) -> dict[str, str | None]:
        """The account the predictions bill: the API, its base URL, 16 hex digits of the token's sha256."""
        digest = hashlib.sha256(self._token.encode()).hexdigest()[:16]
        return {"api": "replicate", "base_url": self.base_url, "key_sha256": digest}

    # -- before sending ----------------------------------------------------------------------------
    def validate(self, request: Mapping[str, Any]) -> Checked:
        """The checked request; `InvalidRequest`/`InvalidConfiguration` naming the field. Sends nothing."""
        checked = checked_request(request, self.token_input)
        self.prices.for_target(checked.target)
        return checked

    def _worst_case(self, request: Mapping[str, Any]) -> float:
        bound = self.prices.for_target(self.validate(request).target).bound
        if bound is None:  # the table is bounded: never, but say so rather than guess
            raise InvalidConfiguration(_WHAT, "prices", "no max_seconds: no worst case")
        return bound

    # -- the port ----------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            checked = self.validate(request)
        except (InvalidRequest, InvalidConfiguration) as exc:  # refused, never "outcome unknown"
            raise ProviderRejected(str(exc)) from None
        price = self.prices.for_target(checked.target)
        headers = {} if price.max_seconds is None else {"Cancel-After": f"{price.max_seconds}s"}
        with redacting(self):
            made = self._api().create(checked.target.path, body(checked, self.token_input, idempotency_token), headers)
            if self.token_input is not None and made.input is not None:
                echoed = made.input.get(self.token_input, idempotency_token)
                if echoed != idempotency_token:
                    raise ProviderOutcomeUnknown(
                        f"create prediction: the answer {made.id} carries another token in input.{self.token_input}: "
                        "which prediction was made for this one is unknown"
                    )
            return made.id

    def find(self, idempotency_token: str) -> str | None:
        """The token's prediction among all the listing holds (`lookup`)."""
        return self._find(idempotency_token, None)

    def find_since(self, idempotency_token: str, since: dt.datetime) -> str | None:
        """The token's prediction among those created since ``since - clock_skew`` (`lookup`)."""
        return self._find(idempotency_token, since)

    def _find(self, token: str, since: dt.datetime | None) -> str | None:
        if self.token_input is None:
            raise ProviderOutcomeUnknown("replicate provider: token_input is None: no lookup (reconcile the episode)")
        with redacting(self):
            try:
                return find_prediction(
                    self._api(),
                    token,
                    since,
                    token_input=self.token_input,
                    clock_skew=self.clock_skew,
                    max_pages=self.max_pages,
                )
            except ProviderOutcomeUnknown:
                raise
            except Exception as exc:  # whatever it was, the lookup proved nothing
                raise ProviderOutcomeUnknown(f"lookup of the token's prediction failed: {exc}") from None

    def status(self, remote_ref: str) -> RemoteStatus:
        with redacting(self):
            return self._status(self._api().get(remote_ref))

    def _status(self, one: Prediction) -> RemoteStatus:
        raw = one.raw
        metrics = raw.get("metrics")
        seconds = reported_cost(metrics.get("predict_time")) if isinstance(metrics, dict) else None
        result: dict[str, Any] = {
            "prediction_id": one.id,
            "status": one.status,
            "model": one.model,
            "version": one.version,
            "created_at": raw.get("created_at"),
            "started_at": _time_text(raw.get("started_at")),
            "completed_at": _time_text(raw.get("completed_at")),
            "predict_time": seconds if seconds is not None and math.isfinite(seconds) else None,
            "data_removed": one.data_removed,
        }
        state = _STATES[one.status]
        if state is RemoteState.SUCCEEDED:
            result["output"] = self._redactor.json(raw.get("output"))
        if not state.terminal:
            return RemoteStatus(state, result=result)
        price = self.prices.for_prediction(one.model, one.version)
        cost = math.nan if price is None else price.cost(one.status, seconds)
        if price is None:
            result["note"] = "this model and version have no price: the cost is unknown"
        return RemoteStatus(state, cost=cost, result=result, error=self._error(one))

    def _error(self, one: Prediction) -> str | None:
        if one.status == "succeeded":
            return None
        if one.status == "aborted":
            return "aborted before it started running (its Cancel-After deadline came first)"
        if one.status == "canceled":
            return "canceled (by someone, or at its Cancel-After deadline)"
        said = one.raw.get("error")
        text = " ".join(str(said).split())[:500] if said else "no error text"
        return self.redact(f"the prediction failed: {text}")


def _time_text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= 40 else None
