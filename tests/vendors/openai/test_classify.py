"""`_stainless.classify` on what the real ``openai`` SDK raises, one branch at a time, against the local double.

Each paid call is made as the adapter makes it (``max_retries=0``), so the exception is that one
try's truth; the double's counters say whether a batch was created.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest

from airflow_idempotent_jobs.errors import ProviderError, ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors._stainless import classify
from tests.vendors.openai.support import API_KEY


def create(client: openai.OpenAI, file_id: str = "file-none") -> Any:
    return client.with_options(max_retries=0).batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"aij_token": "t"}
    )


def upload(client: openai.OpenAI) -> str:
    line = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m"}}\n'
    return client.files.create(file=("in.jsonl", line), purpose="batch").id


def raised(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


@pytest.mark.parametrize(
    ("fault", "expected", "created"),
    [
        ("429", ProviderUnavailable, 0),
        ("400", ProviderRejected, 0),
        ("500", ProviderOutcomeUnknown, 0),  # a 5xx never says whether it created the batch
        ("408_after_accept", ProviderOutcomeUnknown, 1),
        ("409_after_accept", ProviderOutcomeUnknown, 1),
        ("500_after_accept", ProviderOutcomeUnknown, 1),
        ("503_after_accept", ProviderOutcomeUnknown, 1),
        ("drop_after_accept", ProviderOutcomeUnknown, 1),  # RemoteProtocolError: sent, no answer
        ("hang_after_accept", ProviderOutcomeUnknown, 1),  # ReadTimeout: sent, no answer
    ],
)
def test_each_answer_of_the_paid_call_is_classified(
    api: OpenAIApi, fault: str, expected: type[ProviderError], created: int
) -> None:
    client = openai.OpenAI(api_key=API_KEY, base_url=api.base_url, timeout=1.0)
    file_id = upload(client)
    api.configure(fault=fault, fault_times=1, slow_seconds=3)
    error = classify(raised(lambda: create(client, file_id)), openai, "creating the batch")
    assert type(error) is expected, error
    assert api.accepted() == created and api.stats()["submissions"] == 1


def test_a_429_after_the_api_created_the_batch_reads_as_not_sent(api: OpenAIApi) -> None:
    """The one branch that trusts the API: OpenAI documents 429 as "not processed". An API that bills
    and then answers 429 would be read as "not sent" and paid twice; the double can do it, and here is
    what the adapter would believe."""
    client = openai.OpenAI(api_key=API_KEY, base_url=api.base_url, timeout=1.0)
    file_id = upload(client)
    api.configure(fault="429_after_accept", fault_times=1)
    error = classify(raised(lambda: create(client, file_id)), openai, "creating the batch")
    assert isinstance(error, ProviderUnavailable) and api.accepted() == 1


def test_a_wrong_api_key_is_a_refusal(api: OpenAIApi) -> None:
    client = openai.OpenAI(api_key="sk-wrong", base_url=api.base_url, timeout=1.0)
    error = classify(raised(lambda: create(client)), openai, "creating the batch")
    assert isinstance(error, ProviderRejected) and error.status == 401
    assert api.stats()["unauthorized"] == 1 and api.stats()["submissions"] == 0


def test_a_refused_connection_and_a_bad_scheme_were_not_sent() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    for url in (f"http://127.0.0.1:{port}/v1", "ftp://127.0.0.1/v1"):
        client = openai.OpenAI(api_key=API_KEY, base_url=url, timeout=1.0)
        exc = raised(lambda c=client: create(c))  # type: ignore[misc]
        assert type(exc.__cause__).__name__ in ("ConnectError", "UnsupportedProtocol")
        assert isinstance(classify(exc, openai, "creating the batch"), ProviderUnavailable)


def test_a_wait_for_a_pooled_connection_was_not_sent(api: OpenAIApi) -> None:
    """One connection in the pool, held by a call the double hangs: the next call waits, times out, sends nothing."""
    http = openai.DefaultHttpxClient(limits=httpx2.Limits(max_connections=1), timeout=httpx2.Timeout(5.0, pool=0.3))
    client = openai.OpenAI(api_key=API_KEY, base_url=api.base_url, http_client=http, max_retries=0)
    file_id = upload(client)
    api.configure(fault="hang_after_accept", fault_times=1, slow_seconds=2)
    holder = threading.Thread(target=_quiet, args=(client, file_id))
    holder.start()
    try:
        while api.stats()["submissions"] == 0:
            threading.Event().wait(0.01)
        exc = raised(lambda: create(client, file_id))
    finally:
        holder.join()
    assert type(exc.__cause__).__name__ == "PoolTimeout"
    assert isinstance(classify(exc, openai, "creating the batch"), ProviderUnavailable)
    assert api.stats()["submissions"] == 1  # the waiting call never reached the API


def _quiet(client: openai.OpenAI, file_id: str) -> None:
    try:
        create(client, file_id)
    except openai.OpenAIError:
        pass


def test_anything_else_may_have_been_sent() -> None:
    error = classify(ValueError("the SDK could not read the answer"), openai, "creating the batch")
    assert isinstance(error, ProviderOutcomeUnknown) and "may exist" in str(error)
