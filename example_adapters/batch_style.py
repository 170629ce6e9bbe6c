"""An adapter for batch-style APIs: two calls per job, a free upload then the paid batch.

``submit`` uploads the request as the batch's input file (``POST /v1/files``, free), then creates
the batch (``POST /v1/batches {"input_file_id", "metadata": {"token": T}}``, paid). The batch, not
the file, carries the ledger's idempotency token, and ``GET /v1/batches?metadata.token=T`` finds it:
capability (b), as for the prediction style (`_answers.ours` says when a listing proves "no job").

Where the intent is written when a job takes two calls: **once, before the upload.** The ledger
writes ``submitting`` (with the token) durably before it calls ``submit``, and ``submit`` makes both
calls, so one intent covers the whole job:

* A crash between the calls leaves an uploaded file and no batch. The retry finds ``submitting``
  (writer gone), lists the token's batches, gets the positive empty list, and submits once: a
  second upload (free; the first file is an orphan named ``<token>.json``) and one batch. With
  ``lookup=False`` (capability (c)) it refuses until ``idempotent-jobs reconcile --not-submitted``.
* A crash during or after the batch call: the batch carries the token, the retry finds and adopts it.
* The file id is never recorded. Reusing it would save one free upload at the price of a second
  durable write per job and a state the ledger does not know, and would not deduplicate anything:
  such APIs accept several batches from one file.

Failures are classified for the paid call: anything that stops the upload (refused, unreachable,
an answer lost) happens before the batch was sent. A 4xx refusal of the upload is
`ProviderRejected` (nothing paid was created, and the same input would be refused again); every
other upload failure is `ProviderUnavailable`: the batch certainly was not sent, so the ledger may
forget the attempt and a retry uploads again. The batch call is classified as any single call
(`_client`).

``BatchStyleHook`` is loaded on first use, so that this module imports no Airflow. There is no
``astatus``: a deferrable task's trigger runs `status` (two calls once the batch completed: the
batch, then its output file) in a thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from airflow_idempotent_jobs.paid import (
    ProviderCapabilities,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RemoteState,
    RemoteStatus,
    reported_cost,
)

from ._answers import METADATA_KEY, ours
from ._client import JsonClient, job_ref

if TYPE_CHECKING:
    from ._hooks import BatchStyleHook

__all__ = ["BatchStyleHook", "BatchStyleProvider"]

STATES: Final = {
    "validating": RemoteState.PENDING,
    "in_progress": RemoteState.RUNNING,
    "finalizing": RemoteState.RUNNING,
    "cancelling": RemoteState.RUNNING,
    "completed": RemoteState.SUCCEEDED,
    "failed": RemoteState.FAILED,
    "expired": RemoteState.FAILED,
    "cancelled": RemoteState.FAILED,
}
_WHAT: Final = "batch-style provider"


class BatchStyleProvider:
    """A `PaidProvider` for a batch-style API at ``base_url``; the request is the input file's content."""

    def __init__(
        self,
        base_url: str,
        api_token: str,
        *,
        lookup: bool = True,
        endpoint: str = "/v1/generate",
        completion_window: str = "24h",
        **client_options: Any,
    ) -> None:
        self._client = JsonClient(_WHAT, base_url, api_token, **client_options)
        self.base_url = self._client.base_url
        self.lookup = bool(lookup)
        self.endpoint = endpoint
        self.completion_window = completion_window

    def __repr__(self) -> str:
        return f"BatchStyleProvider(base_url={self.base_url!r}, lookup={self.lookup})"

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

    # -- the port ----------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        """Upload the input, then create the batch; the ledger's intent was written before both."""
        file_id = self.upload(request, idempotency_token)
        return self.create_batch(file_id, idempotency_token)

    def upload(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        """The input file's id. Free; any failure but a refusal means "the batch was not sent"."""
        body = {"purpose": "batch", "filename": f"{idempotency_token}.json", "content": dict(request)}
        try:
            answer = self._client.call("POST", "/v1/files", "upload", json=body)
        except ProviderRejected:
            raise
        except ProviderError as exc:
            raise ProviderUnavailable(
                f"{exc} (the upload failed, so the paid batch was never sent)", status=exc.status
            ) from None
        file_id = job_ref(answer.get("id") if isinstance(answer, dict) else None)
        if file_id is None:
            raise ProviderUnavailable("upload: the answer carries no file id (the paid batch was never sent)")
        return file_id

    def create_batch(self, file_id: str, idempotency_token: str) -> str:
        """The paid call: the batch over ``file_id``, carrying the token in its metadata."""
        body = {
            "input_file_id": file_id,
            "endpoint": self.endpoint,
            "completion_window": self.completion_window,
            "metadata": {METADATA_KEY: idempotency_token},
        }
        answer = self._client.call("POST", "/v1/batches", "create batch", json=body)
        ref = job_ref(answer.get("id") if isinstance(answer, dict) else None)
        if ref is None:
            raise ProviderOutcomeUnknown("create batch: the answer carries no batch id: the batch may exist")
        return ref

    def find(self, idempotency_token: str) -> str | None:
        if not self.lookup:
            raise ProviderError(f"{_WHAT}: lookup is switched off: it cannot find batches by token")
        answer = self._client.call(
            "GET", "/v1/batches", "lookup", params={f"metadata.{METADATA_KEY}": idempotency_token}
        )
        if not isinstance(answer, dict):
            raise ProviderOutcomeUnknown("lookup: the answer is not a JSON object: whether a batch exists is unknown")
        return ours(answer.get("data"), idempotency_token, more=answer.get("has_more") is not False, where="data")

    def status(self, remote_ref: str) -> RemoteStatus:
        answer = self._client.call("GET", f"/v1/batches/{quote(remote_ref, safe='')}", "status", strict_numbers=False)
        word = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(word, str) or word not in STATES:
            raise ProviderError(self.redact(f"status: unknown batch status {str(word)[:80]!r}"))
        state = STATES[word]
        usage = answer.get("usage")
        result = None
        output = job_ref(answer.get("output_file_id"))
        if state is RemoteState.SUCCEEDED and output is not None:
            path = f"/v1/files/{quote(output, safe='')}/content"
            result = self._client.redact_json(self._client.call("GET", path, "output", strict_numbers=False))
        return RemoteStatus(
            state=state,
            cost=reported_cost(usage.get("cost") if isinstance(usage, dict) else None),
            result=result,
            error=_errors(answer.get("errors"), self.redact) if state is RemoteState.FAILED else None,
        )


def _errors(errors: Any, redact: Any) -> str:
    """A failed batch's error messages on one line."""
    data = errors.get("data") if isinstance(errors, dict) else None
    messages = [str(item.get("message")) for item in data or [] if isinstance(item, dict) and item.get("message")]
    return redact("; ".join(messages)) if messages else "the batch failed"


def __getattr__(name: str) -> Any:
    """``BatchStyleHook`` on first use: it needs Airflow, the provider does not."""
    if name == "BatchStyleHook":
        from ._hooks import BatchStyleHook

        return BatchStyleHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
