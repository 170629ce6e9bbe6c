"""What boto3 does with a paid Bedrock call whose answer is lost, against the local double with the
real SDK and its default retries: the facts `vendors.bedrock` rests on.

- botocore 1.44's default is the ``standard`` retry mode, 3 attempts (not the ``legacy`` mode's 5
  that older releases and much of the documentation describe).

- boto3 retries a StartAsyncInvoke whose connection dropped, whose read timed out, or that got a
  500 or 429, with the SAME ``clientRequestToken`` (botocore fills it once per API call, before its
  retries): an API that honours the token makes one job however often boto3 repeats the call.
- Without a token of the caller's, each API call gets a fresh one: one call's own retries still make
  one job, but a second call (an Airflow retry of the task) makes a second, billed, job.
- A token used again with other parameters is refused (400 ConflictException) and makes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from airflow_idempotent_jobs.testing.bedrock_api import BedrockRuntimeApi
from tests.vendors.bedrock.support import START, runtime_client

TOKEN = "aij-2026-W32-0-4f1c2d"


@pytest.fixture
def api() -> Iterator[BedrockRuntimeApi]:
    with BedrockRuntimeApi(polls_to_finish=2, slow_seconds=3.0) as server:
        yield server


def runtime(api: BedrockRuntimeApi, **config: Any) -> Any:
    """boto3's bedrock-runtime client at the double, with boto3's default retry mode and attempts."""
    return runtime_client(api.url, **config)


def test_the_default_is_the_standard_mode_with_three_attempts(api: BedrockRuntimeApi) -> None:
    client = runtime(api)
    assert client.meta.config.retries == {"mode": "standard"}  # nothing set by us: botocore's default
    api.configure(fault="500", fault_times=-1)
    with pytest.raises(ClientError) as caught:
        client.start_async_invoke(clientRequestToken=TOKEN, **START)
    assert caught.value.response["Error"]["Code"] == "InternalServerException"
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 2
    assert (api.stats()["submissions"], api.accepted()) == (3, 0)


@pytest.mark.parametrize("fault", ["drop_after_accept", "hang_after_accept", "500_after_accept", "503_after_accept"])
def test_a_lost_answer_is_retried_with_the_same_token_and_makes_one_job(api: BedrockRuntimeApi, fault: str) -> None:
    api.configure(fault=fault, fault_times=1)
    arn = runtime(api).start_async_invoke(clientRequestToken=TOKEN, **START)["invocationArn"]
    stats = api.stats()
    assert (stats["submissions"], stats["accepted"], stats["replayed"]) == (2, 1, 1)
    assert list(stats["invocations"]) == [arn]
    assert api.accepted(TOKEN) == 1


def test_a_throttled_call_is_retried_and_makes_one_job(api: BedrockRuntimeApi) -> None:
    api.configure(fault="429", fault_times=2)
    runtime(api).start_async_invoke(clientRequestToken=TOKEN, **START)
    assert (api.stats()["submissions"], api.accepted()) == (3, 1)


def test_without_a_token_of_its_own_each_call_is_a_new_job(api: BedrockRuntimeApi) -> None:
    """The Airflow operators' way: boto3's own retries share its token; an Airflow retry does not."""
    client = runtime(api)
    api.configure(fault="drop_after_accept", fault_times=1)
    first = client.start_async_invoke(**START)["invocationArn"]
    assert (api.stats()["submissions"], api.accepted()) == (2, 1)  # boto3's retry: its own token again
    second = client.start_async_invoke(**START)["invocationArn"]  # the task's retry: a new call
    assert second != first and api.accepted() == 2
    tokens = [i["clientRequestToken"] for i in api.stats()["invocations"].values()]
    assert len(set(tokens)) == 2 and all(len(t) == 36 for t in tokens)  # botocore's uuid4 per call


def test_a_token_used_again_with_other_parameters_is_refused_and_makes_nothing(api: BedrockRuntimeApi) -> None:
    client = runtime(api)
    client.start_async_invoke(clientRequestToken=TOKEN, **START)
    other = {**START, "modelInput": {**START["modelInput"], "textToVideoParams": {"text": "another week"}}}
    with pytest.raises(ClientError) as caught:
        client.start_async_invoke(clientRequestToken=TOKEN, **other)
    assert caught.value.response["Error"]["Code"] == "ConflictException"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert api.accepted() == 1


def test_the_invocation_ends_and_lists_with_its_token(api: BedrockRuntimeApi) -> None:
    client = runtime(api)
    arn = client.start_async_invoke(clientRequestToken=TOKEN, **START)["invocationArn"]
    states = [client.get_async_invoke(invocationArn=arn)["status"] for _ in range(2)]
    assert states == ["InProgress", "Completed"]
    listed = client.list_async_invokes(maxResults=10)["asyncInvokeSummaries"]
    assert [(s["invocationArn"], s["clientRequestToken"]) for s in listed] == [(arn, TOKEN)]
    unsigned = runtime_client(api.url, signature_version=UNSIGNED)
    with pytest.raises(ClientError) as caught:
        unsigned.get_async_invoke(invocationArn=arn)
    assert caught.value.response["Error"]["Code"] == "AccessDeniedException"
