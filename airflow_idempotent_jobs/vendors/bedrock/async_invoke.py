"""`BedrockAsyncInvokeProvider`: Amazon Bedrock's ``StartAsyncInvoke`` (video such as Nova Reel, results
written to S3) as a paid provider, through boto3's ``bedrock-runtime`` client.

The request is StartAsyncInvoke's own parameters: ``{"modelId", "modelInput", "outputDataConfig":
{"s3OutputDataConfig": {"s3Uri"}}, "tags"}`` (no ``clientRequestToken``: the provider sends the
episode's, `client_request_token`). Bedrock honours that token ("if this token matches a previous
request, Amazon Bedrock ignores the request"), so every repetition of the call, boto3's own retries
and a task's next try alike, answers the one invocation: capability (a), with boto3's retries left
on (tests/vendors/bedrock/test_boto3_retries.py shows what they do). Exceptions: `_botocore.classify`.
AWS does not say how long it remembers a token, so a retry first looks the token up in
ListAsyncInvokes (`_async_lookup`: capability (b) as well) and adopts the invocation it finds.

Cost: GetAsyncInvoke reports no usage and does not return the input, so `status` reports none; the
priced figure is `worst_case(request)` (``per_second`` of ``videoGenerationConfig.durationSeconds``, or
``per_invocation``), which the operator records as the submission's estimate when none is given.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from ...episode import amount_problem
from ...errors import InvalidConfiguration, InvalidRequest, ProviderOutcomeUnknown, ProviderRejected
from ...paid.provider import ProviderCapabilities, RemoteState, RemoteStatus
from ._async_lookup import find_invocation
from ._botocore import Attempts, classify

__all__ = ["BedrockAsyncInvokeProvider", "client_request_token"]

_WHAT: Final = "Bedrock async invoke provider"
_REQUEST: Final = "Bedrock async invoke request"
#: What StartAsyncInvoke accepts as ``clientRequestToken``: 1 to 256 printable ASCII characters, no space.
_TOKEN: Final = re.compile(r"[!-~]{1,256}")
_FIELDS: Final = frozenset({"modelId", "modelInput", "outputDataConfig", "tags"})
_STATES: Final = {"InProgress": RemoteState.RUNNING, "Completed": RemoteState.SUCCEEDED, "Failed": RemoteState.FAILED}
_PRICE_KEYS: Final = frozenset({"per_second", "per_invocation"})


def client_request_token(idempotency_token: str) -> str:
    """The episode's token as StartAsyncInvoke takes it: itself when it fits ``[!-~]{1,256}``, else
    ``aij-`` and its sha256 (the same token gives the same value on every host and try)."""
    if _TOKEN.fullmatch(idempotency_token):
        return idempotency_token
    return "aij-" + hashlib.sha256(idempotency_token.encode()).hexdigest()


class BedrockAsyncInvokeProvider:
    """The port over StartAsyncInvoke / GetAsyncInvoke (module docstring).

    ``client_factory`` returns a boto3 ``bedrock-runtime`` client (the hook builds it from an Airflow
    ``aws`` connection; a test points ``endpoint_url`` at the local double). ``prices``: per model id,
    ``{"per_second": X}`` or ``{"per_invocation": X}`` in the user's currency unit; every model sent
    must have one, so the weekly budget can count it before anything is paid.
    """

    capabilities = ProviderCapabilities(idempotent_tokens=True, lookup=True)

    def __init__(
        self,
        client_factory: Callable[[], Any],
        *,
        prices: Mapping[str, Mapping[str, Any]],
        clock_skew: float = 300.0,
        max_pages: int = 20,
        page_size: int = 100,
    ) -> None:
        self.prices = _checked_prices(prices)
        self._skew, self._max_pages, self._page_size = float(clock_skew), int(max_pages), int(page_size)
        self._client = client_factory()
        self._starts = Attempts(self._client, "StartAsyncInvoke")

    def billing_identity(self) -> dict[str, str | None]:
        """Which endpoint and region the invocations bill through (the account behind the credentials
        would need an STS call: not read)."""
        meta = self._client.meta
        return {"api": "bedrock-runtime", "endpoint": str(meta.endpoint_url), "region": str(meta.region_name)}

    # -- the port ----------------------------------------------------------------------------------
    def validate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The StartAsyncInvoke parameters, checked; `InvalidRequest` naming the field. Sends nothing."""
        if not isinstance(request, Mapping):
            raise InvalidRequest(f"{_REQUEST}: must be an object of StartAsyncInvoke's parameters")
        unknown = set(request) - _FIELDS
        if unknown:
            raise InvalidRequest(f"{_REQUEST}: {sorted(unknown)[0]}: not a parameter this provider sends")
        model = request.get("modelId")
        if not isinstance(model, str) or not model.strip():
            raise InvalidRequest(f"{_REQUEST}: modelId: required")
        if model not in self.prices:
            raise InvalidRequest(f"{_REQUEST}: modelId: {model!r} has no price (prices=)")
        if not isinstance(request.get("modelInput"), Mapping):
            raise InvalidRequest(f"{_REQUEST}: modelInput: required, an object")
        output = request.get("outputDataConfig")
        s3 = output.get("s3OutputDataConfig") if isinstance(output, Mapping) else None
        uri = s3.get("s3Uri") if isinstance(s3, Mapping) else None
        if not isinstance(uri, str) or not uri.startswith("s3://") or len(uri) <= len("s3://"):
            raise InvalidRequest(f"{_REQUEST}: outputDataConfig.s3OutputDataConfig.s3Uri: an s3:// URI")
        return dict(request)

    def worst_case(self, request: Mapping[str, Any]) -> float:
        """The invocation's price: ``per_second`` x the video's ``durationSeconds``, or ``per_invocation``."""
        params = self.validate(request)
        price = self.prices[params["modelId"]]
        if "per_invocation" in price:
            return float(price["per_invocation"])
        config = params["modelInput"].get("videoGenerationConfig")
        seconds = config.get("durationSeconds") if isinstance(config, Mapping) else None
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 7200:
            raise InvalidRequest(
                f"{_REQUEST}: modelInput.videoGenerationConfig.durationSeconds: "
                "a number of seconds is needed to price it (per_second)"
            )
        return float(price["per_second"]) * float(seconds)

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            params = self.validate(request)
        except InvalidRequest as exc:
            raise ProviderRejected(f"refused before sending anything: {exc}") from None
        token = client_request_token(idempotency_token)
        self._starts.start()
        try:
            answer = self._client.start_async_invoke(clientRequestToken=token, **params)
        except Exception as exc:
            raise classify(exc, f"{_WHAT}: StartAsyncInvoke", self._starts) from None
        arn = answer.get("invocationArn") if isinstance(answer, Mapping) else None
        if not isinstance(arn, str) or not arn.startswith("arn:"):
            raise ProviderOutcomeUnknown(f"{_WHAT}: StartAsyncInvoke answered without an invocation ARN")
        return arn

    def status(self, remote_ref: str) -> RemoteStatus:
        try:
            answer = self._client.get_async_invoke(invocationArn=remote_ref)
        except Exception as exc:
            raise classify(exc, f"{_WHAT}: GetAsyncInvoke {remote_ref}") from None
        state = _STATES.get(str(answer.get("status")))
        if state is None:
            raise ProviderOutcomeUnknown(f"{_WHAT}: invocation {remote_ref}: unknown status {answer.get('status')!r}")
        output = answer.get("outputDataConfig") or {}
        result = {
            "invocation_arn": remote_ref,
            "status": answer.get("status"),
            "model_arn": answer.get("modelArn"),
            "output_s3_uri": (output.get("s3OutputDataConfig") or {}).get("s3Uri"),
            "submit_time": _text_time(answer.get("submitTime")),
            "end_time": _text_time(answer.get("endTime")),
        }
        error = str(answer.get("failureMessage") or "the invocation failed") if state is RemoteState.FAILED else None
        return RemoteStatus(state, result=result, error=error)

    def find(self, idempotency_token: str) -> str | None:
        """The invocation made with the episode's token, listing every invocation (`_async_lookup`)."""
        return self._find(idempotency_token, None)

    def find_since(self, idempotency_token: str, since: dt.datetime) -> str | None:
        """`find`, listing the invocations submitted since the token's first intent (less the skew)."""
        return self._find(idempotency_token, since)

    def _find(self, idempotency_token: str, since: dt.datetime | None) -> str | None:
        token = client_request_token(idempotency_token)
        return find_invocation(
            self._client, token, since, clock_skew=self._skew, max_pages=self._max_pages, page_size=self._page_size
        )


def _text_time(value: Any) -> str | None:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return None if value is None else str(value)


def _checked_prices(prices: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    if not isinstance(prices, Mapping) or not prices:
        raise InvalidConfiguration(
            _WHAT, "prices", "give a price per model id: {model: {per_second|per_invocation: X}}"
        )
    checked: dict[str, dict[str, float]] = {}
    for model, price in prices.items():
        keys = set(price) if isinstance(price, Mapping) else set()
        if len(keys) != 1 or not keys <= _PRICE_KEYS:
            raise InvalidConfiguration(_WHAT, f"prices[{model!r}]", "one of per_second or per_invocation")
        (key,) = keys
        value = price[key]
        problem = amount_problem(value)
        if problem:
            raise InvalidConfiguration(_WHAT, f"prices[{model!r}].{key}", f"a finite number >= 0 ({problem})")
        checked[str(model)] = {key: float(value)}
    return checked
