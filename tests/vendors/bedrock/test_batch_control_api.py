"""The control-plane double with the real boto3 ``bedrock`` and ``s3`` clients: what the batch provider
rests on, and that the double answers the way botocore's model of the API says.

- boto3 fills ``clientRequestToken`` once per call (the model marks it ``idempotencyToken``) and keeps
  it over its own retries: a lost answer makes one job; a second call without a token of its own makes
  a second job (but for the name, which AWS keeps unique).
- A token seen before answers its job again and makes nothing; with other parameters it is 400
  ConflictException. A name another job holds is 400 ValidationException.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from airflow_idempotent_jobs.testing.bedrock_control_api import BedrockControlApi
from tests.vendors.bedrock.batch_support import JOB, control_client, s3_client

TOKEN = "aij-2026-W32-0-4f1c2d"
BODY = {**JOB, "jobName": "weekly-4f1c2d"}


@pytest.fixture
def api() -> Iterator[BedrockControlApi]:
    with BedrockControlApi(polls_to_finish=3, slow_seconds=2.0) as server:
        yield server


def code_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response: dict[str, Any] = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.mark.parametrize("fault", ["drop_after_accept", "500_after_accept"])
def test_a_lost_answer_is_retried_with_the_same_token_and_makes_one_job(api: BedrockControlApi, fault: str) -> None:
    api.configure(fault=fault, fault_times=1)
    arn = control_client(api.url).create_model_invocation_job(clientRequestToken=TOKEN, **BODY)["jobArn"]
    stats = api.stats()
    assert (stats["submissions"], stats["accepted"], stats["replayed"]) == (2, 1, 1)
    assert list(stats["jobs"]) == [arn] and api.accepted(TOKEN) == 1


def test_without_a_token_of_its_own_a_second_call_is_a_second_job_but_for_the_name(api: BedrockControlApi) -> None:
    client = control_client(api.url)
    first = client.create_model_invocation_job(**BODY)["jobArn"]
    with pytest.raises(ClientError) as caught:
        client.create_model_invocation_job(**BODY)  # botocore's fresh uuid4: a new request, the same name
    assert code_of(caught) == ("ValidationException", 400) and "name is currently in use" in str(caught.value)
    api.configure(unique_names=False)
    second = client.create_model_invocation_job(**BODY)["jobArn"]
    tokens = {job["clientRequestToken"] for job in api.stats()["jobs"].values()}
    assert second != first and api.accepted() == 2 and len(tokens) == 2


def test_a_token_used_again_with_other_parameters_is_a_conflict_and_makes_nothing(api: BedrockControlApi) -> None:
    client = control_client(api.url)
    client.create_model_invocation_job(clientRequestToken=TOKEN, **BODY)
    with pytest.raises(ClientError) as caught:
        client.create_model_invocation_job(clientRequestToken=TOKEN, **{**BODY, "timeoutDurationInHours": 48})
    assert code_of(caught) == ("ConflictException", 400) and api.accepted() == 1


def test_names_before_tokens_refuses_even_a_faithful_repetition(api: BedrockControlApi) -> None:
    api.configure(names_before_tokens=True)
    client = control_client(api.url)
    client.create_model_invocation_job(clientRequestToken=TOKEN, **BODY)
    with pytest.raises(ClientError) as caught:
        client.create_model_invocation_job(clientRequestToken=TOKEN, **BODY)
    assert code_of(caught) == ("ValidationException", 400) and api.accepted() == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"jobName": "-starts-with-a-dash"}, "jobName"),
        ({"roleArn": "arn:aws:s3:::not-a-role"}, "roleArn"),
        ({"outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "https://x/"}}}, "outputDataConfig"),
        ({"modelInvocationType": "Chat"}, "modelInvocationType"),
    ],
)
def test_invalid_parameters_are_refused(api: BedrockControlApi, change: dict[str, Any], field: str) -> None:
    with pytest.raises(ClientError) as caught:
        control_client(api.url).create_model_invocation_job(clientRequestToken=TOKEN, **{**BODY, **change})
    assert code_of(caught) == ("ValidationException", 400) and field in str(caught.value)
    assert api.accepted() == 0


def test_a_job_moves_on_with_each_read_by_arn_or_id_and_writes_its_manifest(api: BedrockControlApi) -> None:
    api.configure(progress=["Submitted", "Validating", "Scheduled"], end_as="PartiallyCompleted", records=20)
    client = control_client(api.url)
    arn = client.create_model_invocation_job(clientRequestToken=TOKEN, **BODY)["jobArn"]
    job_id = arn.rsplit("/", 1)[1]
    assert api.stats()["jobs"][arn]["status"] == "Submitted"
    seen = [client.get_model_invocation_job(jobIdentifier=ref)["status"] for ref in (arn, job_id, arn, arn)]
    assert seen == ["Validating", "Scheduled", "PartiallyCompleted", "PartiallyCompleted"]
    job = client.get_model_invocation_job(jobIdentifier=arn)
    assert (job["totalRecordCount"], job["successRecordCount"], job["errorRecordCount"]) == (20, 16, 2)
    body = s3_client(api.url).get_object(Bucket="weekly-answers", Key=f"2026-W32/{job_id}/manifest.json.out")["Body"]
    assert b'"inputTokenCount": 225000' in body.read()


def test_unknown_jobs_objects_and_unsigned_calls(api: BedrockControlApi) -> None:
    client, s3 = control_client(api.url), s3_client(api.url)
    with pytest.raises(ClientError) as caught:
        client.get_model_invocation_job(jobIdentifier="abcdef123456")
    assert code_of(caught) == ("ResourceNotFoundException", 404)
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket="weekly-answers", Key="nothing/here")
    assert code_of(caught) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as caught:
        control_client(api.url, signature_version=UNSIGNED).list_model_invocation_jobs()
    assert code_of(caught) == ("AccessDeniedException", 403) and api.stats()["unsigned"] == 1
    assert api.stats()["signed_by"] == {"AKIDLOCALDOUBLE": 2}  # bedrock's and s3's SigV4, with the key id


def test_the_listing_filters_sorts_and_pages(api: BedrockControlApi) -> None:
    client = control_client(api.url)
    arns = [
        client.create_model_invocation_job(clientRequestToken=f"tok{i}", **{**BODY, "jobName": f"week-{i}-x"})["jobArn"]
        for i in range(5)
    ]
    pages, after = [], None
    while True:
        page = client.list_model_invocation_jobs(maxResults=2, **({"nextToken": after} if after else {}))
        pages.append([s["jobArn"] for s in page["invocationJobSummaries"]])
        after = page.get("nextToken")
        if after is None:
            break
    assert pages == [arns[4:2:-1], arns[2:0:-1], arns[:1]]  # newest first
    named = client.list_model_invocation_jobs(nameContains="week-3", sortOrder="Ascending")
    assert [(s["jobName"], s["clientRequestToken"]) for s in named["invocationJobSummaries"]] == [("week-3-x", "tok3")]
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)
    assert client.list_model_invocation_jobs(submitTimeAfter=later)["invocationJobSummaries"] == []
    assert len(client.list_model_invocation_jobs(statusEquals="Submitted")["invocationJobSummaries"]) == 5
