"""`BedrockBatchInferenceProvider` with real boto3 (its default retries on) against the control-plane double.

Capability (a): the episode's token goes as ``clientRequestToken``, with a job name derived from it, on
every call, so a lost answer, whether boto3 retries it or the next task try does, makes one job. A
refusal is `ProviderRejected` with nothing made, once the lookup confirms no job carries the token; a
call none of whose attempts reached the API is `ProviderUnavailable`; anything else is
`ProviderOutcomeUnknown`. Status maps every status of the model's enum; the cost comes from the manifest.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore
import pytest

from airflow_idempotent_jobs.errors import (
    InvalidConfiguration,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from airflow_idempotent_jobs.paid import PaidProvider, RemoteState
from airflow_idempotent_jobs.testing.bedrock_control_api import BedrockControlApi
from airflow_idempotent_jobs.vendors.bedrock.batch_inference import (
    BedrockBatchInferenceProvider,
    batch_job_name,
    batch_request_token,
)
from tests.vendors.bedrock.batch_support import JOB, MODEL, PRICES, batch_provider_at, control_client

TOKEN = "aij-2026-W32-0-9571a9523877e32c"
#: 250 000 input and 40 000 output tokens at 0.125 and 0.625 per million.
COST = 0.05625


@pytest.fixture
def api() -> Iterator[BedrockControlApi]:
    with BedrockControlApi(polls_to_finish=2, slow_seconds=2.0) as server:
        yield server


def model_pattern(shape: str) -> re.Pattern[str]:
    """A string shape's pattern as botocore's own model of the API states it."""
    path = Path(botocore.__file__).parent / "data" / "bedrock" / "2023-04-20" / "service-2.json.gz"
    return re.compile(json.loads(gzip.decompress(path.read_bytes()))["shapes"][shape]["pattern"])


def test_it_is_a_paid_provider_with_tokens_honoured_and_a_lookup(api: BedrockControlApi) -> None:
    adapter = batch_provider_at(api.url)
    assert isinstance(adapter, PaidProvider)
    assert adapter.capabilities.idempotent_tokens and adapter.capabilities.lookup
    assert adapter.billing_identity() == {"api": "bedrock", "endpoint": api.url, "region": "us-east-1"}
    assert not hasattr(adapter, "worst_case")  # nothing in the request bounds the tokens: estimated_cost


@pytest.mark.parametrize("token", [TOKEN, "conformance-0f3e", "aij 2026-W32-0 with a space", "x_" * 200, "-lead"])
def test_the_token_and_name_fit_the_apis_patterns_and_are_stable(token: str) -> None:
    sent, name = batch_request_token(token), batch_job_name(token, "weekly.video+1")
    assert model_pattern("ModelInvocationIdempotencyToken").fullmatch(sent) and len(sent) <= 256
    assert model_pattern("ModelInvocationJobName").fullmatch(name) and len(name) <= 63
    assert (sent, name) == (batch_request_token(token), batch_job_name(token, "weekly.video+1"))
    assert sent == token if token in (TOKEN, "conformance-0f3e") else sent.startswith("aij-") and len(sent) == 68
    assert batch_job_name(token, "a" * 30).endswith(name[-33:]) and len(batch_job_name(token, "a" * 30)) == 63
    assert batch_job_name(token + "x") != batch_job_name(token)


def test_a_job_runs_to_its_end_with_its_output_and_cost(api: BedrockControlApi) -> None:
    adapter = batch_provider_at(api.url)
    arn = adapter.submit(JOB, TOKEN)
    job = api.stats()["jobs"][arn]
    assert (job["jobName"], job["clientRequestToken"]) == (batch_job_name(TOKEN, "weekly"), TOKEN)
    first, second = adapter.status(arn), adapter.status(arn)
    assert (first.state, first.cost, second.state) == (RemoteState.RUNNING, None, RemoteState.SUCCEEDED)
    assert second.cost == pytest.approx(COST) and second.error is None
    assert second.result["output_s3_uri"] == "s3://weekly-answers/2026-W32/"
    assert second.result["usage"] == {"input_tokens": 250_000, "output_tokens": 40_000}
    assert {k: second.result[k] for k in ("job_arn", "job_name", "status", "model_id")} == {
        "job_arn": arn,
        "job_name": job["jobName"],
        "status": "Completed",
        "model_id": MODEL,
    }
    assert second.result["submit_time"].endswith("+00:00") and second.result["end_time"]
    assert adapter.status(arn) == second  # a finished job's answer does not change


def test_a_lost_answer_is_retried_by_boto3_with_the_same_token_and_makes_one_job(api: BedrockControlApi) -> None:
    api.configure(fault="drop_after_accept", fault_times=1)
    arn = batch_provider_at(api.url).submit(JOB, TOKEN)
    assert (api.stats()["submissions"], api.accepted(), api.stats()["replayed"]) == (2, 1, 1)
    assert list(api.stats()["jobs"]) == [arn]


@pytest.mark.parametrize("fault", ["drop_after_accept", "503_after_accept"])
def test_answers_lost_on_every_attempt_are_unknown_and_the_next_try_gets_the_one_job(
    api: BedrockControlApi, fault: str
) -> None:
    api.configure(fault=fault, fault_times=3)  # every attempt of boto3's three
    with pytest.raises(ProviderOutcomeUnknown):
        batch_provider_at(api.url).submit(JOB, TOKEN)
    assert (api.stats()["submissions"], api.accepted()) == (3, 1)
    arn = batch_provider_at(api.url).submit(JOB, TOKEN)  # the task's next try, a new process
    assert api.accepted() == 1 and list(api.stats()["jobs"]) == [arn]


def test_a_held_answer_times_out_and_the_next_try_gets_the_one_job(api: BedrockControlApi) -> None:
    api.configure(fault="hang_after_accept", fault_times=-1)
    with pytest.raises(ProviderOutcomeUnknown, match="ReadTimeout"):
        batch_provider_at(api.url, read_timeout=0.3).submit(JOB, TOKEN)
    api.configure(fault=None)
    batch_provider_at(api.url).submit(JOB, TOKEN)
    assert api.accepted() == 1 and api.accepted(TOKEN) == 1


def test_a_refused_connection_and_throttling_are_not_sent(api: BedrockControlApi) -> None:
    api.configure(fault="429", fault_times=-1)
    with pytest.raises(ProviderUnavailable, match="ThrottlingException"):
        batch_provider_at(api.url).submit(JOB, TOKEN)
    url = api.url
    api.stop()
    with pytest.raises(ProviderUnavailable, match="not sent"):
        batch_provider_at(url).submit(JOB, TOKEN)


def test_a_validation_exception_is_rejected_once_the_lookup_finds_no_job(api: BedrockControlApi) -> None:
    api.configure(fault="400", fault_times=1)
    with pytest.raises(ProviderRejected, match="ValidationException"):
        batch_provider_at(api.url).submit(JOB, TOKEN)
    assert (api.accepted(), api.stats()["lookup_calls"]) == (0, 1)


def test_a_name_checked_before_the_token_still_gives_the_one_job(api: BedrockControlApi) -> None:
    """boto3's second attempt of an accepted call is refused as "name in use": the lookup finds the job."""
    api.configure(names_before_tokens=True, fault="drop_after_accept", fault_times=1)
    arn = batch_provider_at(api.url).submit(JOB, TOKEN)
    stats = api.stats()
    assert (stats["accepted"], stats["name_conflicts"], list(stats["jobs"])) == (1, 1, [arn])
    assert batch_provider_at(api.url).submit(JOB, TOKEN) == arn  # the task's next try, too


def test_our_name_held_under_another_token_is_unknown(api: BedrockControlApi) -> None:
    squatter = {**JOB, "jobName": batch_job_name(TOKEN, "weekly")}
    control_client(api.url).create_model_invocation_job(clientRequestToken="someoneelse", **squatter)
    with pytest.raises(ProviderOutcomeUnknown, match="carries another token"):
        batch_provider_at(api.url).submit(JOB, TOKEN)
    assert api.accepted() == 1


def test_a_token_held_by_other_parameters_is_unknown(api: BedrockControlApi) -> None:
    batch_provider_at(api.url).submit(JOB, TOKEN)
    with pytest.raises(ProviderOutcomeUnknown, match="ConflictException"):
        batch_provider_at(api.url).submit({**JOB, "timeoutDurationInHours": 48}, TOKEN)
    assert api.accepted() == 1


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("Submitted", RemoteState.PENDING),
        ("Validating", RemoteState.PENDING),
        ("Scheduled", RemoteState.PENDING),
        ("InProgress", RemoteState.RUNNING),
        ("Stopping", RemoteState.RUNNING),
        ("Completed", RemoteState.SUCCEEDED),
        ("PartiallyCompleted", RemoteState.FAILED),
        ("Failed", RemoteState.FAILED),
        ("Stopped", RemoteState.FAILED),
        ("Expired", RemoteState.FAILED),
    ],
)
def test_every_status_of_the_model_is_mapped(api: BedrockControlApi, status: str, state: RemoteState) -> None:
    if state.terminal:
        api.configure(end_as=status, polls_to_finish=1)
    else:
        api.configure(progress=["Submitted", status], polls_to_finish=9)
    adapter = batch_provider_at(api.url)
    answer = adapter.status(adapter.submit(JOB, TOKEN))
    assert (answer.state, answer.result["status"]) == (state, status)
    if state is RemoteState.FAILED:
        assert answer.error
    if status in ("Completed", "PartiallyCompleted", "Stopped"):
        assert answer.cost is not None and answer.cost > 0  # records ran: billed, from the manifest
    else:
        assert answer.cost is None


def test_a_partially_completed_job_fails_with_its_counts_and_outputs(api: BedrockControlApi) -> None:
    api.configure(end_as="PartiallyCompleted", polls_to_finish=1, records=100)
    adapter = batch_provider_at(api.url)
    answer = adapter.status(adapter.submit(JOB, TOKEN))
    assert answer.error == (
        "PartiallyCompleted: 88 of 100 records succeeded, 2 failed; outputs in s3://weekly-answers/2026-W32/: "
        "Not all records could be processed in time."
    )
    assert answer.cost == pytest.approx(COST * 0.9)  # 90 records processed


def test_without_an_s3_client_or_a_manifest_there_is_no_cost(api: BedrockControlApi) -> None:
    api.configure(polls_to_finish=1)
    plain = batch_provider_at(api.url, manifest=False)
    assert plain.status(plain.submit(JOB, TOKEN)).cost is None
    api.configure(end_as="Failed")
    adapter = batch_provider_at(api.url)
    failed = adapter.status(adapter.submit(JOB, "aij-2026-W32-1-failed"))
    assert (failed.cost, failed.error) == (None, "The job failed: the input file is not valid JSONL.")
    assert "NoSuchKey" in failed.result["cost_note"]


@pytest.mark.parametrize(
    "text",
    [
        '{"inputTokenCount": NaN, "outputTokenCount": 1}',
        '{"inputTokenCount": 1e400, "outputTokenCount": 1}',
        '{"inputTokenCount": 10000000000000000, "outputTokenCount": 1}',
        '{"inputTokenCount": ' + "9" * 5000 + ', "outputTokenCount": 1}',
        '{"inputTokenCount": "250000", "outputTokenCount": true}',
        "<html><body>Service Unavailable</body></html>",
        "[1, 2]",
        " " * 70_000,
    ],
)
def test_a_manifest_that_is_not_awss_is_a_cost_anomaly(api: BedrockControlApi, text: str) -> None:
    api.configure(polls_to_finish=1, manifest_text=text)
    adapter = batch_provider_at(api.url)
    answer = adapter.status(adapter.submit(JOB, TOKEN))
    assert answer.state is RemoteState.SUCCEEDED and answer.cost is not None and math.isnan(answer.cost)
    assert "is not AWS's" in answer.result["cost_note"]


def test_a_manifest_read_that_fails_is_tried_again(api: BedrockControlApi) -> None:
    api.configure(polls_to_finish=1, object_errors=[500, 500, 500])  # each of boto3's three attempts
    adapter = batch_provider_at(api.url)
    arn = adapter.submit(JOB, TOKEN)
    with pytest.raises(ProviderOutcomeUnknown, match="manifest"):
        adapter.status(arn)
    assert adapter.status(arn).cost == pytest.approx(COST)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"clientRequestToken": "mine"}, "clientRequestToken: not a parameter"),
        ({"roleArn": None}, "roleArn: an IAM role ARN"),
        ({"modelId": "amazon.unpriced-v1"}, "has no price"),
        ({"inputDataConfig": {"s3InputDataConfig": {"s3Uri": "https://x/"}}}, "inputDataConfig.s3InputDataConfig"),
        ({"jobName": "a" * 31}, "jobName: the name's prefix"),
        ({"timeoutDurationInHours": 12}, "timeoutDurationInHours"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_sent(
    api: BedrockControlApi, change: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ProviderRejected, match=fragment):
        batch_provider_at(api.url).submit({**JOB, **change}, TOKEN)
    assert api.stats()["submissions"] == 0


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"prices": {}}, "prices"),
        ({"prices": {MODEL: {"input": -1, "output": 1}}}, "input"),
        ({"max_pages": 0}, "max_pages"),
        ({"page_size": 2.5}, "page_size"),
    ],
)
def test_options_that_cannot_work_are_refused(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfiguration, match=field):
        BedrockBatchInferenceProvider(lambda: None, **{"prices": PRICES, **options})
