"""The conformance kit runs `BedrockBatchInferenceProvider`, with real boto3 and its default retries on,
behind its fault proxy (``paid=["POST /model-invocation-job"]``; the manifest's S3 read goes through
it too). The token is honoured, so boto3 resending the paid call is harmless, and the lookup names a
lost submit's job (another process's too) and never says "no job" for an answer that is not the
API's listing (a gateway's ``{}``, a stray 404)."""

from __future__ import annotations

from airflow_idempotent_jobs.testing.bedrock_control_api import BedrockControlApi
from airflow_idempotent_jobs.testing.conformance import assert_conformant
from tests.vendors.bedrock.batch_support import JOB, batch_provider_at


def test_the_bedrock_batch_inference_adapter_conforms() -> None:
    with BedrockControlApi(polls_to_finish=1) as api:
        report = assert_conformant(
            batch_provider_at, api_url=api.url, request=JOB, paid=["POST /model-invocation-job"], hold_seconds=2.0
        )
        lines = {check.name: check.detail for check in report.checks}
        per_token = api.stats()["accepted_per_token"]
    lost = "submit, paid call: connection closed after the API got the request, without an answer"
    assert "recovered (status finds the job" in lines[lost]  # boto3's own retry, answered by the token
    assert "raised ProviderUnavailable" in lines["submit, connection refused"]
    assert lines["find, a token never used"] == "returned None"
    assert lines["find, the token of a submit another process lost"].startswith("returned 'arn:aws:bedrock:")
    assert lines["submit again with the token of a submit another process lost (idempotent tokens)"].endswith(
        "the same job"
    )
    strays = [name for name in lines if name.startswith("find: HTTP 200")]
    assert strays and all("ProviderOutcomeUnknown" in lines[name] for name in strays)
    assert per_token and set(per_token.values()) == {1}  # no token ever paid for twice
