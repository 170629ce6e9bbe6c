"""`BedrockAsyncInvokeProvider` with real boto3 (its default retries on) against the local double.

Capability (a): the episode's token goes as ``clientRequestToken`` on every call, so a lost answer,
whether boto3 retries it or the next task try does, makes one invocation. A refusal of the request
itself is `ProviderRejected` with nothing made; a call none of whose attempts reached the API
(refused connections, throttling) is `ProviderUnavailable`; anything else is
`ProviderOutcomeUnknown`, and the next submit with the same token answers the one invocation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import (
    InvalidConfiguration,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from airflow_idempotent_jobs.paid import PaidProvider, RemoteState
from airflow_idempotent_jobs.testing.bedrock_api import BedrockRuntimeApi
from airflow_idempotent_jobs.vendors.bedrock import BedrockAsyncInvokeProvider, client_request_token
from tests.vendors.bedrock.support import START, provider_at

MODEL = START["modelId"]
TOKEN = "aij-2026-W32-0-9571a9523877e32c"


@pytest.fixture
def api() -> Iterator[BedrockRuntimeApi]:
    with BedrockRuntimeApi(polls_to_finish=2, slow_seconds=3.0) as server:
        yield server


def provider(api: BedrockRuntimeApi, **prices: Any) -> BedrockAsyncInvokeProvider:
    return provider_at(api.url, prices or None)


def test_it_is_a_paid_provider_with_tokens_honoured_and_a_lookup(api: BedrockRuntimeApi) -> None:
    adapter = provider(api)
    assert isinstance(adapter, PaidProvider)
    assert adapter.capabilities.idempotent_tokens and adapter.capabilities.lookup
    assert adapter.billing_identity() == {"api": "bedrock-runtime", "endpoint": api.url, "region": "us-east-1"}


def test_a_job_runs_to_its_end_with_the_output_location_as_result(api: BedrockRuntimeApi) -> None:
    adapter = provider(api)
    arn = adapter.submit(START, TOKEN)
    assert api.accepted(TOKEN) == 1
    first, second = adapter.status(arn), adapter.status(arn)
    assert (first.state, second.state) == (RemoteState.RUNNING, RemoteState.SUCCEEDED)
    assert second.result["output_s3_uri"] == "s3://weekly-media/2026-W32/"
    assert second.result["invocation_arn"] == arn and second.cost is None
    assert adapter.worst_case(START) == pytest.approx(0.48)  # 6 s x 0.08


def test_a_failed_invocation_says_why(api: BedrockRuntimeApi) -> None:
    api.configure(end_as="Failed", polls_to_finish=1)
    adapter = provider(api)
    status = adapter.status(adapter.submit(START, TOKEN))
    assert (status.state, status.error) == (RemoteState.FAILED, "the model could not render this input")


def test_answers_lost_on_every_attempt_are_unknown_and_the_next_try_gets_the_one_job(api: BedrockRuntimeApi) -> None:
    adapter = provider(api)
    api.configure(fault="drop_after_accept", fault_times=3)  # every attempt of boto3's three
    with pytest.raises(ProviderOutcomeUnknown):
        adapter.submit(START, TOKEN)
    assert (api.stats()["submissions"], api.accepted()) == (3, 1)
    arn = provider(api).submit(START, TOKEN)  # the task's next try, a new process
    assert api.accepted() == 1 and list(api.stats()["invocations"]) == [arn]


@pytest.mark.parametrize("fault", ["500_after_accept", "503_after_accept", "hang_after_accept"])
def test_each_fault_after_accepting_ends_in_one_job(api: BedrockRuntimeApi, fault: str) -> None:
    api.configure(fault=fault, fault_times=-1)
    with pytest.raises(ProviderOutcomeUnknown):
        provider(api).submit(START, TOKEN)
    api.configure(fault=None)
    provider(api).submit(START, TOKEN)
    assert api.accepted() == 1 and api.accepted(TOKEN) == 1


def test_throttled_on_every_attempt_is_not_sent(api: BedrockRuntimeApi) -> None:
    api.configure(fault="429", fault_times=-1)
    with pytest.raises(ProviderUnavailable, match="ThrottlingException"):
        provider(api).submit(START, TOKEN)
    assert (api.stats()["submissions"], api.accepted()) == (3, 0)


def test_a_lost_first_attempt_then_throttling_is_unknown_and_the_next_try_gets_the_one_job(
    api: BedrockRuntimeApi,
) -> None:
    """The last attempt's 429 says nothing of the first, whose job exists: never "not sent"."""
    adapter = provider(api)
    sends = []

    def throttle_after_the_first(**_: Any) -> None:
        sends.append(1)
        if len(sends) == 2:
            api.configure(fault="429", fault_times=-1)

    adapter._client.meta.events.register("before-send.bedrock-runtime.StartAsyncInvoke", throttle_after_the_first)
    api.configure(fault="drop_after_accept", fault_times=1)
    with pytest.raises(ProviderOutcomeUnknown, match="ThrottlingException"):
        adapter.submit(START, TOKEN)
    assert (api.stats()["submissions"], api.accepted()) == (3, 1)
    api.configure(fault=None)
    arn = provider(api).submit(START, TOKEN)
    assert api.accepted() == 1 and list(api.stats()["invocations"]) == [arn]


def test_a_refused_connection_is_not_sent(api: BedrockRuntimeApi) -> None:
    url = api.url
    api.stop()
    closed = provider_at(url)
    with pytest.raises(ProviderUnavailable, match="not sent"):
        closed.submit(START, TOKEN)


def test_a_refused_request_is_rejected_and_makes_nothing(api: BedrockRuntimeApi) -> None:
    api.configure(fault="400", fault_times=1)
    with pytest.raises(ProviderRejected, match="ValidationException"):
        provider(api).submit(START, TOKEN)
    assert api.accepted() == 0


def test_a_token_held_by_other_parameters_is_unknown(api: BedrockRuntimeApi) -> None:
    provider(api).submit(START, TOKEN)
    other = {**START, "modelInput": {**START["modelInput"], "textToVideoParams": {"text": "another week"}}}
    with pytest.raises(ProviderOutcomeUnknown, match="ConflictException"):
        provider(api).submit(other, TOKEN)
    assert api.accepted() == 1


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        ({**START, "clientRequestToken": "mine"}, "clientRequestToken: not a parameter"),
        ({k: v for k, v in START.items() if k != "modelInput"}, "modelInput: required"),
        ({**START, "modelId": "amazon.unpriced-v1"}, "has no price"),
        ({**START, "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "https://x/"}}}, "an s3:// URI"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_sent(
    api: BedrockRuntimeApi, request_: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ProviderRejected, match=fragment):
        provider(api).submit(request_, TOKEN)
    assert api.stats()["submissions"] == 0


@pytest.mark.parametrize("prices", [{}, {MODEL: {"per_second": -0.0}}, {MODEL: {"per_second": 1e999}}, {MODEL: {}}])
def test_prices_that_are_no_price_are_refused(api: BedrockRuntimeApi, prices: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfiguration, match="prices"):
        BedrockAsyncInvokeProvider(lambda: None, prices=prices)


def test_the_token_fits_the_apis_rules() -> None:
    assert client_request_token(TOKEN) == TOKEN
    derived = client_request_token("aij 2026-W32-0 with a space")
    assert (
        derived.startswith("aij-")
        and len(derived) == 68
        and derived == client_request_token("aij 2026-W32-0 with a space")
    )
    assert len(client_request_token("x" * 300)) == 68
