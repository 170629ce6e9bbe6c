"""`AnthropicBatchProvider` on the real SDK against the local API: the happy path, bad input, every error class.

The expected cost comes from the server's documented usage rule, computed in `support` on its own.
Each `_stainless.classify` branch is produced by the real SDK and a real socket: HTTP answers of the
local API, a refused connection, a connect timeout (a listener whose backlog is full), a pool
timeout (the only connection held by another call), a read timeout and a dropped connection.
"""

from __future__ import annotations

import io
import json
import math
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest

from airflow_idempotent_jobs.errors import (
    InvalidConfiguration,
    InvalidRequest,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.anthropic_api import AnthropicApi
from airflow_idempotent_jobs.vendors._stainless import classify
from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchProvider
from tests.vendors.anthropic.support import MODEL, PRICES, REQUEST, expected_cost, provider, request, tag


@pytest.fixture
def api() -> Iterator[AnthropicApi]:
    with AnthropicApi(polls_to_finish=2) as running:
        yield running


def test_a_batch_is_created_once_and_priced_from_its_streamed_results(api: AnthropicApi) -> None:
    paid = provider(api)
    batch = request("what is a lighthouse", "why is the sea salty", "name three rivers of europe", max_tokens=6)
    ref = paid.submit(batch, "token-happy")
    assert api.accepted(tag("token-happy")) == 1 and api.accepted() == 1
    assert paid.status(ref).state is RemoteState.RUNNING  # first poll: still in progress
    done = paid.status(ref)
    assert done.state is RemoteState.SUCCEEDED
    assert done.cost == pytest.approx(expected_cost(batch), rel=1e-12)
    assert done.result["request_counts"]["succeeded"] == 3
    assert set(done.result) == {"batch_id", "processing_status", "request_counts", "usage", "cost"}  # no outputs
    assert done.cost is not None and paid.worst_case(batch) >= done.cost
    out = io.BytesIO()
    assert paid.write_results(ref, out) == 3
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(line["custom_id"] for line in lines) == ["q0", "q1", "q2"]  # the users' own, tag stripped
    assert api.accepted() == 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r["requests"][1].update(custom_id="x" * 42), "requests[1].custom_id"),
        (lambda r: r["requests"][1].update(custom_id="q0"), "requests[1].custom_id"),
        (lambda r: r["requests"][0].update(custom_id="has space"), "requests[0].custom_id"),
        (lambda r: r["requests"][1]["params"].update(max_tokens=True), "requests[1].params.max_tokens"),
        (lambda r: r["requests"][0]["params"].update(messages=[]), "requests[0].params.messages"),
        (lambda r: r["requests"][1]["params"].update(temperature=math.nan), "requests[1].params"),
        (lambda r: r.update(metadata={"a": 1}), "request"),
        (lambda r: r.update(requests=[]), "requests"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_sent(api: AnthropicApi, change: Any, named: str) -> None:
    batch = json.loads(json.dumps(REQUEST))
    change(batch)
    with pytest.raises(InvalidRequest, match=": " + re.escape(named) + ":"):
        provider(api).validate(batch)
    # Through the port, a refusal (the ledger records it failed), never an outcome it cannot know.
    with pytest.raises(ProviderRejected, match=": " + re.escape(named) + ":"):
        provider(api).submit(batch, "token-bad")
    assert api.stats()["submissions"] == 0


def test_a_model_without_prices_is_refused_before_anything_is_sent(api: AnthropicApi) -> None:
    batch = json.loads(json.dumps(REQUEST))
    batch["requests"][1]["params"]["model"] = "claude-unpriced"
    with pytest.raises(ProviderRejected, match="claude-unpriced"):
        provider(api).submit(batch, "token-unpriced")
    with pytest.raises(InvalidConfiguration, match="claude-unpriced"):
        provider(api).validate(batch)
    with pytest.raises(InvalidConfiguration):
        provider(api).worst_case(batch)
    assert api.stats()["submissions"] == 0
    assert MODEL in PRICES


@pytest.mark.parametrize(
    ("fault", "error", "created"),
    [
        ("429", ProviderUnavailable, 0),
        ("500", ProviderOutcomeUnknown, 0),  # a 5xx never says whether it created the batch
        ("429_after_accept", ProviderUnavailable, 1),  # classify's rule: 429 means "not processed"
        ("500_after_accept", ProviderOutcomeUnknown, 1),
        ("529_after_accept", ProviderOutcomeUnknown, 1),
        ("408_after_accept", ProviderOutcomeUnknown, 1),
        ("409_after_accept", ProviderOutcomeUnknown, 1),
        ("drop_after_accept", ProviderOutcomeUnknown, 1),
        ("slow", ProviderOutcomeUnknown, 1),  # past the client's read timeout
    ],
)
def test_each_answer_of_the_create_call_is_classified(
    api: AnthropicApi, fault: str, error: type[Exception], created: int
) -> None:
    api.configure(fault=fault, slow_seconds=3.0)
    with pytest.raises(error):
        provider(api, timeout=1.0).submit(REQUEST, f"token-{fault}")
    assert api.stats()["submissions"] == 1, "sent once: the SDK's retries are off for the paid call"
    assert api.accepted() == created


def test_a_refusal_is_rejected_and_the_echoed_key_is_redacted(api: AnthropicApi) -> None:
    api.configure(echo_token=True)
    wrong_key = AnthropicBatchProvider(api_key="sk-ant-wrong-key-777888999", base_url=api.url, prices=PRICES)
    with pytest.raises(ProviderRejected) as refused:
        wrong_key.submit(REQUEST, "token-401")
    assert "777888999" not in str(refused.value) and "<redacted>" in str(refused.value)
    assert api.accepted() == 0


def test_connection_errors_are_read_by_their_cause(api: AnthropicApi) -> None:
    """Not sent: refused, connect timeout, pool timeout. Maybe sent: read timeout, dropped connection."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    refused = anthropic.Anthropic(api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    assert _classified(refused) == (ProviderUnavailable, "ConnectError")

    with socket.socket() as full:  # backlog 0, filled: the next SYN is never answered
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        waiting = [socket.socket() for _ in range(4)]
        for extra in waiting:
            extra.setblocking(False)
            extra.connect_ex(full.getsockname())
        slow = anthropic.Anthropic(
            api_key="k",
            base_url=f"http://127.0.0.1:{full.getsockname()[1]}",
            max_retries=0,
            timeout=httpx2.Timeout(0.3),
        )
        assert _classified(slow) == (ProviderUnavailable, "ConnectTimeout")
        for sock in waiting:
            sock.close()

    api.configure(fault="slow", fault_times=-1, slow_seconds=2.0)
    pool = httpx2.Client(limits=httpx2.Limits(max_connections=1), timeout=httpx2.Timeout(3.0, pool=0.2))
    shared = anthropic.Anthropic(api_key=api.api_key, base_url=api.url, max_retries=0, http_client=pool)
    holder = threading.Thread(target=lambda: shared.messages.batches.create(requests=REQUEST["requests"]))
    holder.start()
    while api.stats()["submissions"] == 0:
        threading.Event().wait(0.01)
    assert _classified(shared) == (ProviderUnavailable, "PoolTimeout")
    holder.join()

    short = anthropic.Anthropic(api_key=api.api_key, base_url=api.url, max_retries=0, timeout=0.5)
    assert _classified(short) == (ProviderOutcomeUnknown, "ReadTimeout")
    api.configure(fault="drop_after_accept", fault_times=1)
    assert _classified(short) == (ProviderOutcomeUnknown, "RemoteProtocolError")
    assert classify(RuntimeError("a bug"), anthropic, "x").__class__ is ProviderOutcomeUnknown


def _classified(client: anthropic.Anthropic) -> tuple[type[ProviderError], str]:
    try:
        client.messages.batches.create(requests=REQUEST["requests"])
    except Exception as exc:
        error = classify(exc, anthropic, "create")
        return type(error), type(exc.__cause__ or exc).__name__
    raise AssertionError("the call succeeded")


@pytest.mark.parametrize("outcomes", [["errored"], ["canceled"], ["expired"], ["errored", "expired"]])
def test_a_batch_where_nothing_succeeded_fails_naming_its_counts(api: AnthropicApi, outcomes: list[str]) -> None:
    api.configure(end_as=outcomes, polls_to_finish=1)
    paid = provider(api)
    done = paid.status(paid.submit(REQUEST, "token-" + "-".join(outcomes)))
    assert done.state is RemoteState.FAILED
    assert done.cost == 0.0
    for outcome in outcomes:
        assert f"{outcome} {REQUEST['requests'].__len__() // len(outcomes)}" in (done.error or "")


def test_a_partly_succeeded_batch_is_priced_for_its_succeeded_requests(api: AnthropicApi) -> None:
    api.configure(end_as=["succeeded", "errored"], polls_to_finish=1)
    paid = provider(api)
    batch = request("one two", "three four five", "six")
    done = paid.status(paid.submit(batch, "token-partly"))
    assert done.state is RemoteState.SUCCEEDED
    succeeded = {"requests": [batch["requests"][0], batch["requests"][2]]}
    # The cache write belongs to the first request, which succeeded; the third reads the cache.
    assert done.cost == pytest.approx(expected_cost(succeeded), rel=1e-12)
    assert done.result["request_counts"] == {"processing": 0, "succeeded": 2, "errored": 1, "canceled": 0, "expired": 0}


def test_results_that_are_gone_settle_without_a_cost_and_bad_results_are_an_error(api: AnthropicApi) -> None:
    api.configure(polls_to_finish=1)
    paid = provider(api)
    ref = paid.submit(REQUEST, "token-gone")
    api.configure(results_faults=["malformed"])
    with pytest.raises(ProviderError, match="unreadable"):
        paid.status(ref)
    api.configure(results_faults=["500", "500", "500"])
    with pytest.raises(ProviderOutcomeUnknown):
        paid.status(ref)
    api.configure(gone=[ref])
    done = paid.status(ref)
    assert done.state is RemoteState.SUCCEEDED and done.cost is None and done.result["usage"] is None


def test_configuration_errors_name_the_field() -> None:
    with pytest.raises(InvalidConfiguration, match="api_key"):
        AnthropicBatchProvider(prices=PRICES)
    with pytest.raises(InvalidConfiguration, match="base_url"):
        AnthropicBatchProvider(api_key="k", base_url="ftp://x", prices=PRICES)
    with pytest.raises(InvalidConfiguration, match="max_pages"):
        AnthropicBatchProvider(api_key="k", prices=PRICES, max_pages=0)
    with pytest.raises(InvalidConfiguration, match="prices"):
        AnthropicBatchProvider(api_key="k", prices={})
