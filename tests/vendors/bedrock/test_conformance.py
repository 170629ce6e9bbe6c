"""The conformance kit runs `BedrockAsyncInvokeProvider`, with real boto3 and its default retries on,
behind its fault proxy (``paid=["POST /async-invoke"]``). Bedrock honours the token, so boto3 resending
the paid call is harmless: every lost answer on the paid call recovers to the one job, a second submit
with a lost submit's token (from another process too) answers the same job, and a refused connection
is "not sent"."""

from __future__ import annotations

from collections.abc import Callable

from airflow_idempotent_jobs.paid import PaidProvider
from airflow_idempotent_jobs.testing.bedrock_api import BedrockRuntimeApi
from airflow_idempotent_jobs.testing.conformance import assert_conformant
from tests.vendors.bedrock.support import START, provider_at


def factory() -> Callable[[str], PaidProvider]:
    return provider_at


def test_the_bedrock_async_invoke_adapter_conforms() -> None:
    with BedrockRuntimeApi(polls_to_finish=1) as api:
        report = assert_conformant(
            factory(), api_url=api.url, request=START, paid=["POST /async-invoke"], hold_seconds=2.0
        )
        lines = {check.name: check.detail for check in report.checks}
        per_token = api.stats()["accepted_per_token"]
    lost = "submit, paid call: connection closed after the API got the request, without an answer"
    assert "recovered (status finds the job" in lines[lost]  # boto3's own retry, answered by the token
    assert "raised ProviderUnavailable" in lines["submit, connection refused"]
    assert lines["submit again with the token of a submit another process lost (idempotent tokens)"].endswith(
        "the same job"
    )
    assert per_token and set(per_token.values()) == {1}  # no token ever paid for twice
