"""`BedrockBatchInferenceProvider`: Amazon Bedrock batch inference (``CreateModelInvocationJob``) as a
paid provider, through boto3's ``bedrock`` client: idempotent tokens (a) and a lookup.

The request is CreateModelInvocationJob's own parameters: ``{"roleArn", "modelId", "inputDataConfig":
{"s3InputDataConfig": {"s3Uri"}}, "outputDataConfig": {"s3OutputDataConfig": {"s3Uri"}}}`` and
optionally ``timeoutDurationInHours``, ``vpcConfig``, ``tags``, ``modelInvocationType`` and
``jobName``, which here is the name's PREFIX (default ``aij``): the provider sends the episode's
``clientRequestToken`` and a job name derived from it, ``<prefix>-<32 hex digits>``
(`_batch_lookup`: the same on every host and try), so that a second episode never collides with the
first's name and a lookup can list the job by its name.

Bedrock honours the token ("if this token matches a previous request, Amazon Bedrock ignores the
request"), so boto3's own retries stay on, and a task's next try answers the same job. Exceptions:
`_botocore.classify`; a ValidationException is confirmed by the lookup before it is called "nothing
made", since AWS does not document whether it checks the token before the name: an API that checked
the name first would refuse the repetition of our own accepted call as "name in use".

Status: Submitted, Validating, Scheduled are PENDING; InProgress and Stopping (it still ends as
Stopped) RUNNING; Completed SUCCEEDED; Failed, Stopped, Expired and PartiallyCompleted FAILED, as
Airflow's ``BedrockBatchInferenceSensor`` reads them: some records were never processed, so the task
fails rather than hand on partial output as done; the error names the counts and where the outputs
are (the ledger keeps no result for a failed job). Cost: from the job's output manifest when an S3
client is given (`_batch_manifest`), else None and the submission's estimate stands. There is no
``worst_case``: the request holds no bound on its records' tokens (they are in S3), so the operator
needs an ``estimated_cost``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from botocore.exceptions import ClientError, ParamValidationError

from ...errors import InvalidConfiguration, InvalidRequest, ProviderOutcomeUnknown, ProviderRejected
from ...paid.provider import ProviderCapabilities, RemoteState, RemoteStatus
from ..llm_batch import PriceTable
from ._batch_lookup import DEFAULT_PREFIX, JOB_ARN, PREFIX, find_job
from ._batch_lookup import job_name as batch_job_name
from ._batch_lookup import request_token as batch_request_token
from ._batch_manifest import read_usage
from ._botocore import Attempts, classify

__all__ = ["BedrockBatchInferenceProvider", "batch_job_name", "batch_request_token"]

_WHAT: Final = "Bedrock batch inference provider"
_REQUEST: Final = "Bedrock batch inference request"
_REQUIRED: Final = ("roleArn", "modelId", "inputDataConfig", "outputDataConfig")
_OPTIONAL: Final = frozenset({"jobName", "timeoutDurationInHours", "vpcConfig", "tags", "modelInvocationType"})
_ROLE: Final = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
_S3_URI: Final = re.compile(
    r"s3://[a-z0-9][-.a-z0-9]{1,61}[a-z0-9](?:/[-!_*'().a-z0-9A-Z]+(?:/[-!_*'().a-z0-9A-Z]+)*)?/?"
)
_STATES: Final = {
    "Submitted": RemoteState.PENDING,
    "Validating": RemoteState.PENDING,
    "Scheduled": RemoteState.PENDING,
    "InProgress": RemoteState.RUNNING,
    "Stopping": RemoteState.RUNNING,
    "Completed": RemoteState.SUCCEEDED,
    "PartiallyCompleted": RemoteState.FAILED,
    "Failed": RemoteState.FAILED,
    "Stopped": RemoteState.FAILED,
    "Expired": RemoteState.FAILED,
}
_ENDED: Final = {
    "Failed": "the batch inference job failed",
    "Stopped": "the batch inference job was stopped",
    "Expired": "the batch inference job expired before it began",
}


class BedrockBatchInferenceProvider:
    """The port over CreateModelInvocationJob / GetModelInvocationJob / ListModelInvocationJobs.

    ``client_factory`` returns a boto3 ``bedrock`` client (the hook builds it from an Airflow ``aws``
    connection; a test points ``endpoint_url`` at the local double). ``prices``: batch prices per
    million tokens per model id, ``{model: {"input": X, "output": Y}}`` (`PriceTable`); every model
    sent must have one. ``s3_client_factory``: a boto3 ``s3`` client to read the output manifest
    for the cost (without it, no cost). ``clock_skew``: seconds the API's clock may differ from ours
    (the lookup's window starts that much before the intent); ``max_pages`` of ``page_size`` jobs:
    how far a lookup lists before it gives up (`ProviderOutcomeUnknown`).
    """

    capabilities = ProviderCapabilities(idempotent_tokens=True, lookup=True)

    def __init__(
        self,
        client_factory: Callable[[], Any],
        *,
        prices: PriceTable | Mapping[str, Any],
        s3_client_factory: Callable[[], Any] | None = None,
        clock_skew: float = 300.0,
        max_pages: int = 20,
        page_size: int = 100,
    ) -> None:
        self.prices = PriceTable.parse(prices)
        for name, value, low, high in (
            ("clock_skew", clock_skew, 0, 86400),
            ("max_pages", max_pages, 1, 10_000),
            ("page_size", page_size, 1, 1000),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise InvalidConfiguration(_WHAT, name, f"must be a number from {low} to {high}")
            if name != "clock_skew" and not isinstance(value, int):
                raise InvalidConfiguration(_WHAT, name, "must be an integer")
        self.clock_skew, self.max_pages, self.page_size = float(clock_skew), int(max_pages), int(page_size)
        self._client = client_factory()
        self._creates = Attempts(self._client, "CreateModelInvocationJob")
        self._s3_factory = s3_client_factory
        self._s3: Any = None

    def __repr__(self) -> str:
        return f"BedrockBatchInferenceProvider(models={sorted(self.prices.models)})"

    def billing_identity(self) -> dict[str, str | None]:
        """Which endpoint and region the jobs bill through (the account behind the credentials would
        need an STS call: not read)."""
        meta = self._client.meta
        return {"api": "bedrock", "endpoint": str(meta.endpoint_url), "region": str(meta.region_name)}

    # -- before sending ----------------------------------------------------------------------------
    def validate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The CreateModelInvocationJob parameters, checked; `InvalidRequest` naming the field. Sends nothing."""
        if not isinstance(request, Mapping):
            raise InvalidRequest(f"{_REQUEST}: must be an object of CreateModelInvocationJob's parameters")
        unknown = sorted(set(request) - _OPTIONAL - set(_REQUIRED))
        if unknown:
            raise InvalidRequest(f"{_REQUEST}: {unknown[0]}: not a parameter this provider sends")
        for name in _REQUIRED:
            if name not in request:
                raise InvalidRequest(f"{_REQUEST}: {name}: required")
        role, model = request["roleArn"], request["modelId"]
        if not isinstance(role, str) or not _ROLE.fullmatch(role):
            raise InvalidRequest(f"{_REQUEST}: roleArn: an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
        if not isinstance(model, str) or not 1 <= len(model) <= 2048:
            raise InvalidRequest(f"{_REQUEST}: modelId: a model id")
        if model not in self.prices.models:
            raise InvalidRequest(f"{_REQUEST}: modelId: {model[:100]!r} has no price (prices=)")
        for field, inner in (("inputDataConfig", "s3InputDataConfig"), ("outputDataConfig", "s3OutputDataConfig")):
            config = request[field].get(inner) if isinstance(request[field], Mapping) else None
            uri = config.get("s3Uri") if isinstance(config, Mapping) else None
            if not isinstance(uri, str) or len(uri) > 1024 or not _S3_URI.fullmatch(uri):
                raise InvalidRequest(f"{_REQUEST}: {field}.{inner}.s3Uri: an s3:// URI of a bucket (and a key)")
        prefix = request.get("jobName", DEFAULT_PREFIX)
        if not isinstance(prefix, str) or not PREFIX.fullmatch(prefix):
            raise InvalidRequest(
                f"{_REQUEST}: jobName: the name's prefix, 1 to 30 of a-z A-Z 0-9 + . - (starting with a letter "
                "or digit); the provider appends the token's tag"
            )
        hours = request.get("timeoutDurationInHours")
        if hours is not None and (isinstance(hours, bool) or not isinstance(hours, int) or not 24 <= hours <= 168):
            raise InvalidRequest(f"{_REQUEST}: timeoutDurationInHours: an integer from 24 to 168")
        if request.get("modelInvocationType") not in (None, "InvokeModel", "Converse"):
            raise InvalidRequest(f"{_REQUEST}: modelInvocationType: InvokeModel or Converse")
        if "tags" in request and not isinstance(request["tags"], list):
            raise InvalidRequest(f"{_REQUEST}: tags: a list of {{key, value}}")
        if "vpcConfig" in request and not isinstance(request["vpcConfig"], Mapping):
            raise InvalidRequest(f"{_REQUEST}: vpcConfig: an object (subnetIds, securityGroupIds)")
        return dict(request)

    # -- the port ----------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            params = self.validate(request)
        except InvalidRequest as exc:
            raise ProviderRejected(f"refused before sending anything: {exc}") from None
        prefix = params.pop("jobName", DEFAULT_PREFIX)
        params["jobName"] = batch_job_name(idempotency_token, prefix)
        params["clientRequestToken"] = batch_request_token(idempotency_token)
        what = f"{_WHAT}: CreateModelInvocationJob"
        self._creates.start()
        try:
            answer = self._client.create_model_invocation_job(**params)
        except ParamValidationError as exc:
            raise ProviderRejected(f"{what}: refused by botocore before sending anything: {exc}") from None
        except Exception as exc:
            error = classify(exc, what, self._creates)
            if isinstance(error, ProviderRejected) and _code(exc) == "ValidationException":
                return self._confirm(error, idempotency_token)
            raise error from None
        arn = answer.get("jobArn") if isinstance(answer, Mapping) else None
        if not isinstance(arn, str) or not JOB_ARN.fullmatch(arn):
            raise ProviderOutcomeUnknown(f"{what} answered without a job ARN")
        return arn

    def _confirm(self, refusal: ProviderRejected, idempotency_token: str) -> str:
        """A ValidationException is "nothing made" only once the lookup proves no job carries the token."""
        try:
            found = self.find(idempotency_token)
        except ProviderOutcomeUnknown as exc:
            raise ProviderOutcomeUnknown(f"{refusal}; and {exc}") from None
        if found is None:
            raise refusal
        return found

    def status(self, remote_ref: str) -> RemoteStatus:
        try:
            answer = self._client.get_model_invocation_job(jobIdentifier=remote_ref)
        except Exception as exc:
            raise classify(exc, f"{_WHAT}: GetModelInvocationJob {remote_ref}") from None
        status = answer.get("status") if isinstance(answer, Mapping) else None
        state = _STATES.get(status) if isinstance(status, str) else None
        if state is None or not isinstance(answer.get("jobArn"), str):
            raise ProviderOutcomeUnknown(f"{_WHAT}: job {remote_ref}: unknown status {str(status)[:60]!r}")
        output = (answer.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}
        result: dict[str, Any] = {
            "job_arn": answer["jobArn"],
            "job_name": answer.get("jobName"),
            "status": status,
            "model_id": answer.get("modelId"),
            "output_s3_uri": output.get("s3Uri"),
            "submit_time": _text_time(answer.get("submitTime")),
            "end_time": _text_time(answer.get("endTime")),
            "message": answer.get("message"),
        }
        records = {k: answer[k] for k in ("totalRecordCount", "successRecordCount", "errorRecordCount") if k in answer}
        if records:
            result["records"] = records
        cost = self._cost(answer, result) if state.terminal else None
        error = None
        if status == "PartiallyCompleted":
            error = _partial(answer, result)
        elif state is RemoteState.FAILED:
            error = str(answer.get("message") or _ENDED.get(str(status), "the batch inference job failed"))
        return RemoteStatus(state, cost=cost, result=result, error=error)

    def find(self, idempotency_token: str) -> str | None:
        """The token's job among every job named for it (`_batch_lookup.find_job`)."""
        return self._find(idempotency_token, None)

    def find_since(self, idempotency_token: str, since: dt.datetime) -> str | None:
        """As `find`, among the jobs submitted since ``since - clock_skew``."""
        return self._find(idempotency_token, since)

    def _find(self, idempotency_token: str, since: dt.datetime | None) -> str | None:
        skew, pages, size = self.clock_skew, self.max_pages, self.page_size
        return find_job(self._client, idempotency_token, since, clock_skew=skew, max_pages=pages, page_size=size)

    def _cost(self, answer: Mapping[str, Any], result: dict[str, Any]) -> float | None:
        """The ended job's cost from its manifest; None without an S3 client or a manifest."""
        uri, job_id = result["output_s3_uri"], str(answer["jobArn"]).rpartition("/")[2]
        if self._s3_factory is None or not isinstance(uri, str) or not uri.startswith("s3://"):
            return None
        if self._s3 is None:
            self._s3 = self._s3_factory()
        usage = read_usage(self._s3, uri, job_id, str(answer.get("modelId")), self.prices)
        if usage.counts is not None:
            result["usage"] = {"input_tokens": usage.counts["inputTokenCount"]}
            result["usage"]["output_tokens"] = usage.counts["outputTokenCount"]
        if usage.note is not None:
            result["cost_note"] = usage.note
        return usage.cost


def _partial(answer: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """Why a PartiallyCompleted job is failed, with what it did and where its outputs are."""
    total, ok, bad = (answer.get(k) for k in ("totalRecordCount", "successRecordCount", "errorRecordCount"))
    counts = f"{ok} of {total} records succeeded, {bad} failed" if total is not None else "some records were not run"
    message = f": {answer['message']}" if answer.get("message") else ""
    return f"PartiallyCompleted: {counts}; outputs in {result.get('output_s3_uri')}{message}"


def _code(exc: BaseException) -> str:
    return str(((exc.response or {}).get("Error") or {}).get("Code") or "") if isinstance(exc, ClientError) else ""


def _text_time(value: Any) -> str | None:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).isoformat()
    return None if value is None else str(value)
