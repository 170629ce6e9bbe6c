"""`AnthropicBatchProvider`: one Anthropic message batch per episode, through the official ``anthropic`` SDK.

The request is the body of ``POST /v1/messages/batches``: ``{"requests": [{"custom_id": "q1",
"params": {"model", "max_tokens", "messages", ...}}, ...]}``; it is checked before anything is sent
(`_requests`: custom_ids of at most 41 characters, unique; every model priced). The create call is
made once (the SDK's own retries off: `_stainless.PAID_CALL_OPTIONS`), with each custom_id behind
the token's tag; reads keep the SDK's retries. Capability (b), lookup: `lookup` says how a retry
proves which batch is its own, and what that costs. `status` streams the results once the batch
ended and prices the usage they report (`PriceTable`: cache writes and reads apart); its result
holds counts, usage and cost, never the outputs: `write_results` streams those to a file, with
the users' own custom_ids.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Callable, Mapping
from typing import IO, Any, ClassVar

import anthropic

from ...errors import InvalidConfiguration, InvalidRequest, ProviderError, ProviderOutcomeUnknown, ProviderRejected
from ...paid._redaction import Redactor
from ...paid.provider import ProviderCapabilities, RemoteState, RemoteStatus
from ...paid.results import redacting
from .._stainless import PAID_CALL_OPTIONS, billing_identity
from ..llm_batch import PriceTable, RequestBound, Usage
from ._requests import checked_requests, request_bounds, strip_tag, tagged
from ._wire import Batches, BatchInfo, Malformed, parse_line
from .lookup import find_batch

__all__ = ["AnthropicBatchProvider"]

_WHAT = "anthropic batch provider"
_STATES = {"in_progress": RemoteState.RUNNING, "canceling": RemoteState.RUNNING}


class AnthropicBatchProvider:
    """A `PaidProvider` for Anthropic's Message Batches API (module docstring).

    Give ``client_factory`` (returns an ``anthropic.Anthropic``; called once per process) or
    ``api_key`` with an optional ``base_url``, ``timeout`` (seconds) and ``read_retries`` (the SDK's
    own retries, for reads only). ``prices``: the batch
    prices per model. ``clock_skew``: seconds the API's clock may differ from ours (the lookup's
    window starts that much before the intent). ``max_pages`` of ``page_size`` batches: how far a
    lookup lists before it gives up (`ProviderOutcomeUnknown`).
    """

    #: Options of the paid create call: the SDK must not send it twice (a test subclass shows why).
    paid_call_options: ClassVar[Mapping[str, Any]] = PAID_CALL_OPTIONS

    def __init__(
        self,
        client_factory: Callable[[], anthropic.Anthropic] | None = None,
        *,
        prices: PriceTable | Mapping[str, Any],
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        read_retries: int = 2,
        clock_skew: float = 300.0,
        max_pages: int = 50,
        page_size: int = 100,
    ) -> None:
        self.prices = PriceTable.parse(prices)
        if (client_factory is None) == (api_key is None):
            raise InvalidConfiguration(_WHAT, "api_key", "give either client_factory or api_key (and not both)")
        if api_key is not None and (not isinstance(api_key, str) or not api_key.strip()):
            raise InvalidConfiguration(_WHAT, "api_key", "must be a non-empty text")
        if base_url is not None and (not isinstance(base_url, str) or not base_url.startswith(("https://", "http://"))):
            raise InvalidConfiguration(_WHAT, "base_url", "must be an http(s) URL")
        for name, value, low, high in (
            ("timeout", timeout, 0.0, 3600.0),
            ("read_retries", read_retries, 0, 10),
            ("clock_skew", clock_skew, 0.0, 86400.0),
            ("max_pages", max_pages, 1, 10_000),
            ("page_size", page_size, 1, 1000),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise InvalidConfiguration(_WHAT, name, f"must be a number from {low} to {high}")
            if name in ("max_pages", "page_size", "read_retries") and not isinstance(value, int):
                raise InvalidConfiguration(_WHAT, name, "must be an integer")
        self._factory = client_factory or (
            lambda: anthropic.Anthropic(
                api_key=api_key, base_url=base_url, timeout=float(timeout), max_retries=int(read_retries)
            )
        )
        self.clock_skew, self.max_pages, self.page_size = float(clock_skew), int(max_pages), int(page_size)
        self._built: tuple[int, Batches, Redactor] | None = None

    def __repr__(self) -> str:
        return f"AnthropicBatchProvider(models={sorted(self.prices.models)})"

    capabilities = ProviderCapabilities(idempotent_tokens=False, lookup=True)

    def _api(self) -> tuple[Batches, Redactor]:
        """The SDK client of this process (a forked child builds its own connections)."""
        if self._built is None or self._built[0] != os.getpid():
            client = self._factory()
            secrets = [s for s in (client.api_key, getattr(client, "auth_token", None)) if isinstance(s, str) and s]
            self._built = (os.getpid(), Batches(client, dict(self.paid_call_options)), Redactor(secrets))
        return self._built[1], self._built[2]

    def redact(self, text: str) -> str:
        """``text`` without the API key, in any form."""
        return self._api()[1].text(text)

    def billing_identity(self) -> dict[str, str | None]:
        """The account the batches bill (`_stainless.billing_identity`): the ledger binds the episode to it."""
        return billing_identity("anthropic", self._api()[0].client)

    # -- before sending ----------------------------------------------------------------------------
    def validate(self, request: Mapping[str, Any]) -> list[RequestBound]:
        """Each request's bound; `InvalidRequest`/`InvalidConfiguration` naming the field. Sends nothing."""
        return request_bounds(checked_requests(request, self.prices))

    def worst_case(self, request: Mapping[str, Any]) -> float:
        """The most the batch can cost (`PriceTable.worst_case`): for ``estimated_cost`` and the budget."""
        return self.prices.worst_case(self.validate(request))

    # -- the port ----------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            requests = checked_requests(request, self.prices)
            request_bounds(requests)  # every params has a JSON form, before anything is sent
        except (InvalidRequest, InvalidConfiguration) as exc:  # refused, never "outcome unknown"
            raise ProviderRejected(str(exc)) from None
        batches, _ = self._api()
        with redacting(self):
            return batches.create(tagged(requests, idempotency_token))

    def find(self, idempotency_token: str) -> str | None:
        """The token's batch among all the listing holds (`lookup`)."""
        return self._find(idempotency_token, None)

    def find_since(self, idempotency_token: str, since: dt.datetime) -> str | None:
        """The token's batch among those created since ``since - clock_skew`` (`lookup`)."""
        return self._find(idempotency_token, since)

    def _find(self, token: str, since: dt.datetime | None) -> str | None:
        batches, _ = self._api()
        with redacting(self):
            try:
                return find_batch(
                    batches,
                    token,
                    since,
                    clock_skew=self.clock_skew,
                    max_pages=self.max_pages,
                    page_size=self.page_size,
                )
            except ProviderOutcomeUnknown:
                raise
            except Exception as exc:  # whatever it was, the lookup proved nothing
                raise ProviderOutcomeUnknown(f"lookup of the token's message batch failed: {exc}") from None

    def status(self, remote_ref: str) -> RemoteStatus:
        batches, _ = self._api()
        with redacting(self):
            info = batches.retrieve(remote_ref)
            summary = {"batch_id": info.id, "processing_status": info.status, "request_counts": info.counts}
            if info.status != "ended":
                return RemoteStatus(_STATES[info.status], result=summary)
            return self._ended(batches, info, summary)

    def _ended(self, batches: Batches, info: BatchInfo, summary: dict[str, Any]) -> RemoteStatus:
        counts = info.counts
        state = RemoteState.SUCCEEDED if counts["succeeded"] else RemoteState.FAILED
        failed = ", ".join(f"{name} {counts[name]}" for name in ("errored", "canceled", "expired"))
        if info.archived or not info.results_ready:  # results gone: the estimate stands for the cost
            result = {**summary, "usage": None, "cost": None, "note": "the results are gone: no usage to price"}
            return RemoteStatus(
                state, result=result, error=None if counts["succeeded"] else f"nothing succeeded: {failed}"
            )
        usage: dict[str, Usage] = {}
        seen = dict.fromkeys(counts, 0)
        first_error: str | None = None
        try:
            with batches.results(info.id) as lines:
                for raw in lines:
                    line = parse_line(raw)
                    seen[line.outcome] += 1
                    if line.usage is not None and line.model is not None:
                        usage.setdefault(line.model, Usage()).add(line.usage)
                    first_error = first_error or line.error
        except Malformed as exc:
            raise ProviderError(f"message batch {info.id}: its results are unreadable: {exc}") from None
        if any(seen[name] != counts[name] for name in ("succeeded", "errored", "canceled", "expired")):
            raise ProviderOutcomeUnknown(f"message batch {info.id}: its results do not match its counts {counts}")
        unpriced = sorted(model for model in usage if model not in self.prices.models)
        cost = math.nan if unpriced else self.prices.cost(usage)
        result = {
            **summary,
            "usage": {model: used.to_dict() for model, used in sorted(usage.items())},
            "cost": None if unpriced else cost,
            **({"unpriced_models": unpriced} if unpriced else {}),
        }
        error = None
        if state is RemoteState.FAILED:
            error = self.redact(
                f"nothing succeeded: {failed}" + (f"; first error: {first_error}" if first_error else "")
            )
        return RemoteStatus(state, cost=cost, result=result, error=error)

    # -- the outputs -------------------------------------------------------------------------------
    def write_results(self, remote_ref: str, out: IO[bytes]) -> int:
        """Stream the ended batch's result lines to ``out`` (JSON lines, the users' custom_ids); their number."""
        batches, _ = self._api()
        written = 0
        with redacting(self):
            info = batches.retrieve(remote_ref)
            if info.status != "ended" or info.archived or not info.results_ready:
                raise ProviderError(f"message batch {info.id} has no results to read ({info.status})")
            try:
                with batches.results(info.id) as lines:
                    for raw in lines:
                        line = dict(parse_line(raw).raw)
                        line["custom_id"] = strip_tag(str(line["custom_id"]))
                        out.write(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
                        written += 1
            except Malformed as exc:
                raise ProviderError(f"message batch {info.id}: its results are unreadable: {exc}") from None
        return written
