"""`OpenAIBatchProvider`: the OpenAI Batch API as a paid provider, through the official ``openai`` SDK.

``submit`` makes two calls: the upload of the JSONL input (free; the SDK may retry it, and any
failure there is "not sent", since nothing paid was) and ``batches.create`` (paid), made with the
SDK's retries off (`PAID_CALL_OPTIONS`: one lost answer must not become two billed batches) and the
idempotency token in the batch's ``metadata`` (``aij_token``). OpenAI honours no idempotency key,
so a retry finds the batch by listing (`find_since`, `_listing`). The request's shape is in
`_requests`; the cost of a finished batch in `_usage`. Reads keep the SDK's retries. Every answer
is read strictly from its raw body: a 200 that is not the API's answer proves nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any, Final, cast

import openai

from ...errors import (
    InvalidConfiguration,
    InvalidRequest,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from ...paid._redaction import Redactor
from ...paid.provider import ProviderCapabilities, RemoteState, RemoteStatus
from .._stainless import PAID_CALL_OPTIONS, billing_identity, classify
from ..llm_batch import PriceTable
from ._listing import scan
from ._requests import TOKEN_KEY, BatchRequest, parse_request
from ._usage import Tally

__all__ = ["OpenAIBatchProvider"]

_WHAT: Final = "OpenAI batch provider"
_STATES: Final = {
    "validating": RemoteState.PENDING,
    "in_progress": RemoteState.RUNNING,
    "finalizing": RemoteState.RUNNING,
    "cancelling": RemoteState.RUNNING,
    "completed": RemoteState.SUCCEEDED,
    "failed": RemoteState.FAILED,
    "expired": RemoteState.FAILED,
    "cancelled": RemoteState.FAILED,
}
_CHUNK: Final = 1024 * 1024


class _HashingReader(io.RawIOBase):
    """The input file as the SDK streams it: hashed as read, the hash restarted when a retry rewinds it."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        position = self._handle.seek(offset, whence)
        if position == 0:
            self.digest = hashlib.sha256()
        return position

    def tell(self) -> int:
        return self._handle.tell()

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        self.digest.update(data)
        return len(data)


class OpenAIBatchProvider:
    """The port over OpenAI batches: capability (b), lookup by listing (module docstring).

    Build it with ``api_key`` (and ``base_url``, ``timeout``) or with ``client_factory``, a callable
    returning an ``openai.OpenAI``; ``prices``: a `PriceTable` or its JSON form. ``clock_skew``: how
    far the API's clock and this host's may disagree, in seconds; ``max_pages`` of ``page_size``
    batches bound one lookup.
    """

    capabilities = ProviderCapabilities(lookup=True)

    def __init__(
        self,
        *,
        prices: PriceTable | Mapping[str, Any],
        client_factory: Callable[[], openai.OpenAI] | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        clock_skew: float = 300.0,
        max_pages: int = 20,
        page_size: int = 100,
    ) -> None:
        self.prices = PriceTable.parse(prices)
        _number("clock_skew", clock_skew, 0, 86400)
        _number("timeout", timeout, 0.001, 3600)
        for name, value, top in (("max_pages", max_pages, 10_000), ("page_size", page_size, 100)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise InvalidConfiguration(_WHAT, name, f"must be a whole number from 1 to {top}")
        self.clock_skew, self.max_pages, self.page_size = float(clock_skew), max_pages, page_size
        if client_factory is None:
            if not isinstance(api_key, str) or not api_key.strip():
                raise InvalidConfiguration(_WHAT, "api_key", "is required (or give client_factory)")
            self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout)
        else:
            self._client = client_factory()
        key = getattr(self._client, "api_key", None)
        self._redactor = Redactor([f"Bearer {key}"] if isinstance(key, str) and key else [])

    def billing_identity(self) -> dict[str, str | None]:
        """The account the batches bill (`_stainless.billing_identity`): the ledger binds the episode to it."""
        return billing_identity("openai", self._client, "organization", "project")

    # -- the port ----------------------------------------------------------------------------------
    def validate(self, request: Mapping[str, Any]) -> BatchRequest:
        """The checked request; `InvalidRequest`/`InvalidConfiguration` naming the field. Sends nothing.

        A prepared file must carry its sha256 and still hold those bytes: the ledger's fingerprint
        binds the episode to them (`prepare_request`), so another file is another request.
        """
        batch = parse_request(request, self.prices)
        if batch.path is not None and batch.declared_sha256 is None:
            raise InvalidRequest(
                f"OpenAI batch request: input_file.sha256: {batch.path} has none (use prepare_request)"
            )
        if batch.declared_sha256 is not None and batch.sha256 != batch.declared_sha256:
            raise InvalidRequest(
                f"OpenAI batch request: input_file: {batch.path} changed since prepare_request (sha256 "
                f"{batch.sha256}, not {batch.declared_sha256}): prepare the request again"
            )
        return batch

    def worst_case(self, request: Mapping[str, Any]) -> float:
        """The most the batch can cost (`PriceTable.worst_case`): for the weekly budget, before sending."""
        return self.prices.worst_case(line.bound() for line in self.validate(request).lines)

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            batch = parse_request(request, self.prices)
            if not isinstance(idempotency_token, str) or not 0 < len(idempotency_token) <= 512:
                raise InvalidRequest(f"the idempotency token must be 1 to 512 characters for metadata.{TOKEN_KEY}")
        except (InvalidRequest, InvalidConfiguration) as exc:
            raise ProviderRejected(f"refused before sending anything: {exc}") from None
        if batch.declared_sha256 is None and batch.path is not None:
            raise ProviderRejected(f"refused before sending anything: {batch.path}: no sha256 (use prepare_request)")
        if batch.declared_sha256 is not None and batch.sha256 != batch.declared_sha256:
            raise ProviderUnavailable(
                f"not sent: {batch.path} changed since prepare_request (sha256 {batch.sha256}, "
                f"not {batch.declared_sha256}): prepare the request again"
            )
        file_id = self._upload(batch, idempotency_token)
        return self._create(batch, file_id, {**batch.metadata, TOKEN_KEY: idempotency_token})

    def status(self, remote_ref: str) -> RemoteStatus:
        batch = self._batch(remote_ref)
        state = _STATES[batch["status"]]
        counts = batch.get("request_counts") or {"total": 0, "completed": 0, "failed": 0}
        if not state.terminal:
            return RemoteStatus(
                state, result={"batch_id": remote_ref, "status": batch["status"], "request_counts": counts}
            )
        tally = Tally(self.prices)
        for file_id in (batch.get("output_file_id"), batch.get("error_file_id")):
            if file_id is not None:
                tally.add_lines(self._file_lines(file_id))
        if batch["status"] != "failed" and counts["completed"] and batch.get("output_file_id") is None:
            raise ProviderOutcomeUnknown(
                f"batch {remote_ref}: {counts['completed']} requests completed but no output file"
            )
        result = {
            "batch_id": remote_ref,
            "status": batch["status"],
            "output_file_id": batch.get("output_file_id"),
            "error_file_id": batch.get("error_file_id"),
            "request_counts": counts,
            "usage": tally.to_dict(),
            "cost": None if math.isnan(tally.cost()) else tally.cost(),
        }
        if tally.problems():
            result["cost_problem"] = tally.problems()
        error = None if state is RemoteState.SUCCEEDED else self._ended_text(remote_ref, batch, counts)
        return RemoteStatus(state, cost=tally.cost(), result=result, error=error)

    def find(self, idempotency_token: str) -> str | None:
        return self._scan(idempotency_token, None)

    def find_since(self, idempotency_token: str, since: dt.datetime) -> str | None:
        if since.tzinfo is None:
            return self.find(idempotency_token)
        return self._scan(idempotency_token, math.floor(since.timestamp() - self.clock_skew))

    def redact(self, text: str) -> str:
        return self._redactor.text(text)

    def stream_output(self, remote_ref: str, sink: IO[bytes], *, errors: bool = False) -> int:
        """Copy the batch's output file (its error file with ``errors``) into ``sink``, chunk by chunk; bytes copied."""
        batch = self._batch(remote_ref)
        file_id = batch.get("error_file_id" if errors else "output_file_id")
        if file_id is None:
            return 0
        copied = 0
        try:
            with self._client.files.with_streaming_response.content(file_id) as response:
                for chunk in response.iter_bytes(_CHUNK):
                    sink.write(chunk)
                    copied += len(chunk)
        except openai.OpenAIError as exc:
            raise self._classified(exc, f"reading file {file_id}") from None
        return copied

    # -- the calls ---------------------------------------------------------------------------------
    def _paid_client(self) -> openai.OpenAI:
        """The client for the one call that costs money: no retries of the SDK's own."""
        client: Any = self._client  # the options' types are the SDK's; their values are ours
        return cast(openai.OpenAI, client.with_options(**PAID_CALL_OPTIONS))

    def _upload(self, batch: BatchRequest, token: str) -> str:
        name = f"{token}.jsonl"
        handle: IO[bytes] = io.BytesIO(batch.content or b"")
        try:
            if batch.path is not None:
                handle = batch.path.open("rb")
        except OSError as exc:
            raise ProviderUnavailable(f"not sent: cannot read {batch.path}: {exc.strerror or exc}") from None
        reader = _HashingReader(handle)
        try:
            with handle:
                raw = self._client.files.with_raw_response.create(
                    file=(name, cast(IO[bytes], reader), "application/jsonl"), purpose="batch"
                )
                answer = _json(raw.http_response.content)
        except Exception as exc:  # nothing paid was sent, whatever went wrong
            error = self._classified(exc, "uploading the batch input")
            kind = ProviderRejected if isinstance(error, ProviderRejected) else ProviderUnavailable
            raise kind(f"{error} (the paid call was not sent)", status=error.status) from None
        file_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(file_id, str) or not file_id or answer.get("object") != "file":
            raise ProviderUnavailable(
                "uploading the batch input: the answer is not a file object (the paid call was not sent)"
            )
        if batch.declared_sha256 is not None and reader.digest.hexdigest() != batch.declared_sha256:
            raise ProviderUnavailable(
                f"not sent: {batch.path} changed while it was uploaded: prepare the request again"
            )
        return file_id

    def _create(self, batch: BatchRequest, file_id: str, metadata: dict[str, str]) -> str:
        try:
            raw = self._paid_client().batches.with_raw_response.create(
                input_file_id=file_id,
                endpoint=batch.endpoint,  # type: ignore[arg-type]  # one of ENDPOINTS, checked
                completion_window="24h",
                metadata=metadata,
            )
        except Exception as exc:
            raise self._classified(exc, "creating the batch") from None
        answer = _json(raw.http_response.content)
        batch_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(batch_id, str) or not batch_id or answer.get("object") != "batch":
            raise ProviderOutcomeUnknown("creating the batch: the answer is not a batch object (the batch may exist)")
        return batch_id

    def _batch(self, remote_ref: str) -> dict[str, Any]:
        what = f"status of batch {remote_ref}"
        try:
            raw = self._client.batches.with_raw_response.retrieve(remote_ref)
        except Exception as exc:
            raise self._classified(exc, what) from None
        batch = _json(raw.http_response.content)
        counts = batch.get("request_counts") if isinstance(batch, dict) else None
        if (
            not isinstance(batch, dict)
            or batch.get("object") != "batch"
            or batch.get("id") != remote_ref
            or batch.get("status") not in _STATES
            or not (counts is None or _counts(counts))
            or not all(
                batch.get(k) is None or isinstance(batch.get(k), str) for k in ("output_file_id", "error_file_id")
            )
        ):
            raise ProviderOutcomeUnknown(f"{what}: the answer is not this batch")
        return batch

    def _file_lines(self, file_id: str) -> Iterator[str]:
        try:
            with self._client.files.with_streaming_response.content(file_id) as response:
                yield from response.iter_lines()
        except openai.OpenAIError as exc:
            raise self._classified(exc, f"reading file {file_id}") from None

    def _scan(self, token: str, floor: int | None) -> str | None:
        what = "looking the token up"

        def fetch(after: str | None) -> bytes:
            try:
                options: dict[str, Any] = {"limit": self.page_size} | ({"after": after} if after else {})
                raw = self._client.batches.with_raw_response.list(**options)
                return bytes(raw.http_response.content)
            except Exception as exc:
                raise ProviderOutcomeUnknown(f"{self._classified(exc, what)} (nothing is proven)") from None

        return scan(fetch, TOKEN_KEY, token, floor, self.max_pages, what)

    def _classified(self, exc: BaseException, what: str) -> ProviderError:
        error = classify(exc, openai, what)
        return type(error)(self.redact(str(error)), status=error.status)

    def _ended_text(self, ref: str, batch: Mapping[str, Any], counts: Mapping[str, int]) -> str:
        said = f"batch {ref} ended {batch['status']}: {counts['completed']} of {counts['total']} requests completed"
        said += f", {counts['failed']} failed"
        errors = batch.get("errors")
        data = errors.get("data") if isinstance(errors, dict) else None
        if isinstance(data, list) and data:
            said += "; " + "; ".join(str(e.get("message", e))[:200] for e in data[:3] if isinstance(e, dict))
        return self.redact(said)


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _counts(raw: Any) -> bool:
    return isinstance(raw, dict) and all(
        isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool) and raw[k] >= 0
        for k in ("total", "completed", "failed")
    )


def _number(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidConfiguration(_WHAT, name, f"must be a number of seconds from {low:g} to {high:g}")
