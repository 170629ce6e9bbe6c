"""What Bedrock's control plane checks of a batch inference job, and how the double shows one: the
patterns of botocore's ``bedrock`` 2023-04-20 model (``CreateModelInvocationJob``'s ValidationException
answers), the statuses, and a job's public form (its summary in a listing, its GetModelInvocationJob).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final

__all__ = [
    "END_STATES",
    "JOB_ID",
    "LISTING_MODES",
    "MANIFESTED",
    "RUNNING",
    "STATUSES",
    "create_problem",
    "listing_problem",
    "public",
]

STATUSES: Final = frozenset(
    {
        "Submitted",
        "Validating",
        "Scheduled",
        "InProgress",
        "Stopping",
        "Completed",
        "PartiallyCompleted",
        "Failed",
        "Stopped",
        "Expired",
    }
)
#: The statuses a job passes through before it ends (the double's ``progress``).
RUNNING: Final = frozenset({"Submitted", "Validating", "Scheduled", "InProgress", "Stopping"})
#: The statuses a job may end in (the double's ``end_as``).
END_STATES: Final = STATUSES - RUNNING
#: The end states whose output holds a manifest (records were processed, and are billed).
MANIFESTED: Final = frozenset({"Completed", "PartiallyCompleted", "Stopped"})
#: What a listing does: answer honestly, or lie in one of the ways the provider must see through.
LISTING_MODES: Final = frozenset({"honest", "unfiltered", "other_token", "no_token", "endless", "repeat_token"})

_NAME: Final = re.compile(r"[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}")
_TOKEN: Final = re.compile(r"[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}")
_ROLE: Final = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
_S3_URI: Final = re.compile(
    r"s3://[a-z0-9][-.a-z0-9]{1,61}[a-z0-9](?:/[-!_*'().a-z0-9A-Z]+(?:/[-!_*'().a-z0-9A-Z]+)*)?/?"
)
#: A job id as GetModelInvocationJob takes it (alone or at the end of its ARN).
JOB_ID: Final = re.compile(
    r"((arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:model-invocation-job/)?(?P<id>[a-z0-9]{12}))"
)
_REQUIRED: Final = ("jobName", "roleArn", "modelId", "inputDataConfig", "outputDataConfig")
_KNOWN: Final = frozenset(
    {*_REQUIRED, "clientRequestToken", "vpcConfig", "timeoutDurationInHours", "tags", "modelInvocationType"}
)


def _invalid(field: str, value: Any, constraint: str) -> str:
    return f"1 validation error detected: Value '{value}' at '{field}' failed to satisfy constraint: {constraint}"


def _pattern(regex: re.Pattern[str]) -> str:
    return f"Member must satisfy regular expression pattern: {regex.pattern}"


def create_problem(body: Any) -> str | None:
    """Why a CreateModelInvocationJob body is not valid (a ValidationException's message), or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        return f"unknown field {unknown[0]!r}"
    for name in _REQUIRED:
        if name not in body:
            return f"1 validation error detected: Value null at '{name}' failed to satisfy constraint: must not be null"
    name, token = body["jobName"], body.get("clientRequestToken")
    if not isinstance(name, str) or len(name) > 63 or not _NAME.fullmatch(name):
        return _invalid("jobName", name, _pattern(_NAME))
    if token is not None and (not isinstance(token, str) or len(token) > 256 or not _TOKEN.fullmatch(token)):
        return _invalid("clientRequestToken", token, _pattern(_TOKEN))
    if not isinstance(body["roleArn"], str) or not _ROLE.fullmatch(body["roleArn"]):
        return _invalid("roleArn", body["roleArn"], "Member must be an IAM role ARN")
    if not isinstance(body["modelId"], str) or not 1 <= len(body["modelId"]) <= 2048:
        return _invalid("modelId", body["modelId"], "Member must have length between 1 and 2048")
    for field, inner in (("inputDataConfig", "s3InputDataConfig"), ("outputDataConfig", "s3OutputDataConfig")):
        config = body[field].get(inner) if isinstance(body[field], dict) else None
        uri = config.get("s3Uri") if isinstance(config, dict) else None
        if not isinstance(uri, str) or len(uri) > 1024 or not _S3_URI.fullmatch(uri):
            return _invalid(f"{field}.{inner}.s3Uri", uri, "Member must be an s3:// URI")
    hours = body.get("timeoutDurationInHours")
    if hours is not None and (isinstance(hours, bool) or not isinstance(hours, int) or not 24 <= hours <= 168):
        return _invalid("timeoutDurationInHours", hours, "Member must have value between 24 and 168")
    if body.get("modelInvocationType") not in (None, "InvokeModel", "Converse"):
        return _invalid("modelInvocationType", body["modelInvocationType"], "Member must be InvokeModel or Converse")
    return None


def listing_problem(query: dict[str, list[str]]) -> str | None:
    """Why a ListModelInvocationJobs query is not valid (a ValidationException's message), or None."""
    status = query.get("statusEquals", [None])[-1]
    if status is not None and status not in STATUSES:
        return _invalid("statusEquals", status, f"Member must satisfy enum value set: {sorted(STATUSES)}")
    name = query.get("nameContains", [None])[-1]
    if name is not None and (len(name) > 63 or not _NAME.fullmatch(name)):
        return _invalid("nameContains", name, _pattern(_NAME))
    if query.get("sortBy", ["CreationTime"])[-1] != "CreationTime":
        return _invalid("sortBy", query["sortBy"][-1], "Member must satisfy enum value set: [CreationTime]")
    if query.get("sortOrder", ["Descending"])[-1] not in ("Ascending", "Descending"):
        return _invalid("sortOrder", query["sortOrder"][-1], "Member must be Ascending or Descending")
    size = query.get("maxResults", ["1000"])[-1]
    if not size.isdigit() or not 1 <= int(size) <= 1000:
        return _invalid("maxResults", size, "Member must have value between 1 and 1000")
    return None


def public(job: dict[str, Any]) -> dict[str, Any]:
    """A job as the API shows it: without the double's own ``_`` fields and absent values."""
    return {k: copy.deepcopy(v) for k, v in job.items() if not k.startswith("_") and v is not None}
