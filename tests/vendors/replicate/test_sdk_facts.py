"""What the ``replicate`` SDK (1.0.7) does on its own, proven against the local API with its public calls.

The provider rests on these facts: a POST is sent once whatever happens (a lost answer, a 503, a
429), and ``create`` waits for its answer without any read timeout; GETs are retried on
429/503/504 only, never after an exception; a numeric ``Retry-After`` is slept uncapped;
``predictions.list(next)`` sends the token to whatever host ``next`` names; errors are
``ReplicateError`` with the status, transport errors are httpx's own, unwrapped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from replicate.client import Client, RetryTransport
from replicate.exceptions import ReplicateError

from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi
from airflow_idempotent_jobs.vendors.replicate import _wire
from tests.vendors.replicate.support import MODEL, VERSION, provider


@pytest.fixture
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(polls_to_finish=2) as running:
        yield running


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDK's retry sleeps, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr("replicate.client.time.sleep", slept.append)
    return slept


def sdk(api: ReplicateApi, timeout: float = 1.0) -> Client:
    return Client(api.api_token, base_url=api.url, timeout=httpx.Timeout(timeout))


CREATES: dict[str, Callable[[Client], Any]] = {
    "predictions.create": lambda c: c.predictions.create(version=VERSION, input={"text": "Alice"}),
    "models.predictions.create": lambda c: c.models.predictions.create(model=MODEL, input={"prompt": "x"}),
}


@pytest.mark.parametrize("create", sorted(CREATES))
def test_a_lost_create_answer_is_not_sent_again(api: ReplicateApi, create: str) -> None:
    api.configure(fault="drop_after_accept")
    with pytest.raises(httpx.RemoteProtocolError):  # httpx's own, not wrapped
        CREATES[create](sdk(api))
    assert (api.stats()["submissions"], api.accepted()) == (1, 1), "sent once; the prediction exists"


@pytest.mark.parametrize("create", sorted(CREATES))
@pytest.mark.parametrize("fault", ["503", "429"])
def test_a_create_call_is_sent_once_on_503_and_429(
    api: ReplicateApi, sleeps: list[float], create: str, fault: str
) -> None:
    api.configure(fault=fault)
    with pytest.raises(ReplicateError) as raised:
        CREATES[create](sdk(api))
    assert raised.value.status == int(fault)
    assert api.stats()["submissions"] == 1 and sleeps == []
    assert "POST" not in RetryTransport.RETRYABLE_METHODS  # the source's own rule


@pytest.mark.parametrize("create", sorted(CREATES))
def test_the_sdks_create_waits_past_the_clients_read_timeout_and_the_providers_does_not(
    api: ReplicateApi, create: str
) -> None:
    """Without ``wait``, ``create`` passes ``timeout=None`` to httpx: no read timeout at all."""
    api.configure(fault="slow", slow_seconds=1.5)
    made = CREATES[create](sdk(api, timeout=0.5))  # the client's read timeout is 0.5 s; the answer comes after 1.5
    assert made.id and api.stats()["submissions"] == 1
    api.configure(fault="slow", fault_times=1)
    with pytest.raises(ProviderOutcomeUnknown, match="ReadTimeout"):
        provider(api, timeout=0.5).submit({"model": MODEL, "input": {"prompt": "x"}}, "token-slow")
    assert api.stats()["submissions"] == 2


def test_gets_are_retried_on_429_503_504_only_and_never_after_an_exception(
    api: ReplicateApi, sleeps: list[float]
) -> None:
    client = sdk(api)
    ref = client.models.predictions.create(model=MODEL, input={"prompt": "x"}).id
    api.configure(status_errors=[503, 429, 504])
    assert client.predictions.get(ref).id == ref
    assert api.stats()["status_calls"] == 4 and len(sleeps) == 3
    api.configure(status_errors=[500])
    with pytest.raises(ReplicateError) as refused:
        client.predictions.get(ref)
    assert refused.value.status == 500 and api.stats()["status_calls"] == 5
    api.configure(status_faults=["drop"])
    with pytest.raises(httpx.RemoteProtocolError):
        client.predictions.get(ref)
    assert api.stats()["status_calls"] == 6 and len(sleeps) == 3


def test_a_numeric_retry_after_is_slept_uncapped_and_the_provider_caps_it(
    api: ReplicateApi, sleeps: list[float]
) -> None:
    assert RetryTransport(httpx.HTTPTransport())._calculate_sleep(1, {"Retry-After": "86400"}) == 86400.0
    paid = provider(api)
    ref = paid.submit({"model": MODEL, "input": {"prompt": "x"}}, "token-retry-after")
    api.configure(status_errors=[503, 429], retry_after="86400")
    assert paid.status(ref).result["prediction_id"] == ref
    assert sleeps == [_wire.RETRY_AFTER_CAP, _wire.RETRY_AFTER_CAP]


def test_the_sdk_sends_the_token_wherever_next_points_and_the_provider_does_not() -> None:
    with ReplicateApi(api_token="r8_elsewhere0000000000") as elsewhere, ReplicateApi(page_size=1) as api:
        api.configure(next_base=elsewhere.url)
        client = sdk(api)
        for prompt in ("one", "two"):
            client.models.predictions.create(model=MODEL, input={"prompt": prompt})
        first = client.predictions.list()
        assert first.next is not None and first.next.startswith(elsewhere.url)
        with pytest.raises(ReplicateError):
            client.predictions.list(first.next)
        ours = hashlib.sha256(api.api_token.encode()).hexdigest()[:16]
        assert elsewhere.stats()["refused_tokens"] == [ours], "the SDK sent our token to the other host"
        # The provider's lookup reads only the cursor of next, and asks its own base URL for it.
        paid = provider(api)
        ref = paid.submit({"model": MODEL, "input": {"prompt": "three"}}, "token-next")
        assert paid.find("token-next") == ref
        with pytest.raises(ProviderOutcomeUnknown, match="cannot be ruled out"):
            paid.find("token-never-used")  # the SDK's own two predictions carry no token: not proven
        assert elsewhere.stats()["refused_tokens"] == [ours] and api.stats()["list_calls"] >= 4


def test_a_refused_connection_is_httpx_connect_error_unwrapped() -> None:
    client = Client("r8_x", base_url="http://127.0.0.1:9", timeout=httpx.Timeout(1.0))
    with pytest.raises(httpx.ConnectError):
        client.models.predictions.create(model=MODEL, input={})
