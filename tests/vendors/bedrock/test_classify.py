"""`_botocore.classify` on botocore's own ClientError, for the codes no double fault produces: a refusal
that says "not now" (a quota, throttling) on the only attempt is "not made, retry later"; after a retry,
an earlier attempt may have made the job."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable
from airflow_idempotent_jobs.vendors.bedrock._botocore import classify


def client_error(code: str, status: int, retries: int = 0) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": f"{code} said no"},
        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": retries},
    }
    return ClientError(response, "CreateModelInvocationJob")


@pytest.mark.parametrize(
    ("code", "status", "retries", "expected"),
    [
        ("ServiceQuotaExceededException", 400, 0, ProviderUnavailable),
        ("ThrottlingException", 429, 0, ProviderUnavailable),
        ("ServiceQuotaExceededException", 400, 2, ProviderOutcomeUnknown),
        ("ThrottlingException", 429, 2, ProviderOutcomeUnknown),
        ("ValidationException", 400, 0, ProviderRejected),
        ("ConflictException", 400, 0, ProviderOutcomeUnknown),
        ("InternalServerException", 500, 0, ProviderOutcomeUnknown),
    ],
)
def test_each_code_is_read_with_the_attempts_it_took(code: str, status: int, retries: int, expected: type) -> None:
    error = classify(client_error(code, status, retries), "Bedrock: CreateModelInvocationJob")
    assert type(error) is expected, error
    assert code in str(error) and "\n" not in str(error)
