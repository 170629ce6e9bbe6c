"""An adapter for prediction-style APIs: one paid ``POST /v1/predictions`` per job, no idempotency header.

Such an API cannot deduplicate a resubmission (no capability (a)), so the adapter writes the
ledger's idempotency token into the job's ``metadata``, which the API stores and echoes, and finds
a job a lost answer made by listing ``GET /v1/predictions?metadata.token=T``: capability (b).

"No job" is proven only by a 200 answer whose ``results`` is an empty list with no next page. A
listing is trusted only as far as it shows: an API that ignores the filter lists other jobs too, so
a job is adopted only when its own ``metadata.token`` is ours, and a listing without ours proves
nothing unless it is empty; two jobs with our token are not chosen between (someone must look).
With ``lookup=False`` (an API without the listing) a lost answer is settled by ``idempotent-jobs
reconcile``: capability (c).

``PredictionStyleHook`` (for ``PaidGenerationOperator(provider_hook=...)``) is loaded on first use,
so that this module imports no Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from airflow_idempotent_jobs.paid import (
    ProviderCapabilities,
    ProviderError,
    ProviderOutcomeUnknown,
    RemoteState,
    RemoteStatus,
    reported_cost,
)

from ._answers import METADATA_KEY, ours
from ._client import JsonClient, job_ref

if TYPE_CHECKING:
    from ._hooks import PredictionStyleHook

__all__ = ["METADATA_KEY", "PredictionStyleHook", "PredictionStyleProvider"]

#: The API's status words, mapped to the ledger's four.
STATES: Final = {
    "starting": RemoteState.PENDING,
    "processing": RemoteState.RUNNING,
    "succeeded": RemoteState.SUCCEEDED,
    "failed": RemoteState.FAILED,
    "canceled": RemoteState.FAILED,
}
_WHAT: Final = "prediction-style provider"


class PredictionStyleProvider:
    """A `PaidProvider` for a prediction-style API at ``base_url``; the request is the prediction's ``input``."""

    def __init__(self, base_url: str, api_token: str, *, lookup: bool = True, **client_options: Any) -> None:
        self._client = JsonClient(_WHAT, base_url, api_token, **client_options)
        self.base_url = self._client.base_url
        self.lookup = bool(lookup)

    def __repr__(self) -> str:
        return f"PredictionStyleProvider(base_url={self.base_url!r}, lookup={self.lookup})"

    @property
    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(idempotent_tokens=False, lookup=self.lookup)

    def redact(self, text: str) -> str:
        """``text`` without the API token, in any form."""
        return self._client.redact(text)

    @property
    def secret_forms(self) -> tuple[str, ...]:
        """Every text `redact` replaces: for a log masker, never for logging."""
        return self._client.secret_forms

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        body = {"input": dict(request), "metadata": {METADATA_KEY: idempotency_token}}
        answer = self._client.call("POST", "/v1/predictions", "submit", json=body)
        ref = job_ref(answer.get("id") if isinstance(answer, dict) else None)
        if ref is None:
            raise ProviderOutcomeUnknown("submit: the answer carries no prediction id: the prediction may exist")
        return ref

    def find(self, idempotency_token: str) -> str | None:
        if not self.lookup:
            raise ProviderError(f"{_WHAT}: lookup is switched off: it cannot find predictions by token")
        answer = self._client.call(
            "GET", "/v1/predictions", "lookup", params={f"metadata.{METADATA_KEY}": idempotency_token}
        )
        if not isinstance(answer, dict):
            raise ProviderOutcomeUnknown(
                "lookup: the answer is not a JSON object: whether a prediction exists is unknown"
            )
        return ours(answer.get("results"), idempotency_token, more=answer.get("next") is not None, where="results")

    def status(self, remote_ref: str) -> RemoteStatus:
        path = f"/v1/predictions/{quote(remote_ref, safe='')}"
        return self._status(self._client.call("GET", path, "status", strict_numbers=False))

    async def astatus(self, remote_ref: str) -> RemoteStatus:
        """`status` without blocking a triggerer's event loop."""
        path = f"/v1/predictions/{quote(remote_ref, safe='')}"
        return self._status(await self._client.acall("GET", path, "status", strict_numbers=False))

    def _status(self, answer: Any) -> RemoteStatus:
        word = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(word, str) or word not in STATES:
            raise ProviderError(self.redact(f"status: unknown prediction status {str(word)[:80]!r}"))
        metrics = answer.get("metrics")
        error = answer.get("error")
        return RemoteStatus(
            state=STATES[word],
            cost=reported_cost(metrics.get("cost") if isinstance(metrics, dict) else None),
            result=self._client.redact_json(answer.get("output")),
            error=None if error is None else self.redact(str(error)),
        )


def __getattr__(name: str) -> Any:
    """``PredictionStyleHook`` on first use: it needs Airflow, the provider does not."""
    if name == "PredictionStyleHook":
        from ._hooks import PredictionStyleHook

        return PredictionStyleHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
