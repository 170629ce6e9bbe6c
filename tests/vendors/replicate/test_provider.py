"""`ReplicatePredictionProvider` on the real SDK against the local API: the happy path, bad input, every error class.

Each `_classify.classify` branch is produced by the real SDK and a real socket: HTTP answers of the
local API, a refused connection, a connect timeout (a listener whose backlog is full), a pool
timeout (the only connection held by another call), a read timeout and a dropped connection.
"""

from __future__ import annotations

import copy
import logging
import math
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from replicate.client import Client

from airflow_idempotent_jobs.errors import (
    InvalidConfiguration,
    InvalidRequest,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi
from airflow_idempotent_jobs.vendors.replicate import ReplicatePredictionProvider
from airflow_idempotent_jobs.vendors.replicate._classify import classify
from tests.vendors.replicate.support import MODEL, PRICES, REQUEST, VERSION, VERSION_REQUEST, expected_cost, provider


@pytest.fixture
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(polls_to_finish=2) as running:
        yield running


def test_a_prediction_is_created_once_capped_and_priced_from_its_predict_time(api: ReplicateApi) -> None:
    paid = provider(api)
    ref = paid.submit(REQUEST, "token-happy")
    assert api.accepted("token-happy") == 1 and api.accepted() == 1
    seen = api.stats()["predictions"][ref]
    assert seen["input"] == {**REQUEST["input"], "idempotency_token": "token-happy"}
    assert seen["deadline"] is not None, "max_seconds went out as Cancel-After"
    running = paid.status(ref)
    assert running.state is RemoteState.RUNNING and running.cost is None
    done = paid.status(ref)
    assert done.state is RemoteState.SUCCEEDED and done.error is None
    assert done.cost == pytest.approx(expected_cost(2.5), rel=1e-12)
    assert done.result["output"] == [f"https://replicate.delivery/xezq/{ref}/out-0.png"]
    assert (done.result["prediction_id"], done.result["model"], done.result["predict_time"]) == (ref, MODEL, 2.5)
    assert paid.worst_case is None, "the version's price has no max_seconds: no honest worst case for the table"
    assert api.accepted() == 1


def test_a_version_request_goes_to_predictions_and_has_no_worst_case_without_a_cap(api: ReplicateApi) -> None:
    paid = provider(api, prices={VERSION: PRICES[VERSION]})
    assert paid.worst_case is None, "per second without max_seconds: no honest bound"
    ref = paid.submit(VERSION_REQUEST, "token-version")
    paid.status(ref)
    done = paid.status(ref)
    assert (done.result["model"], done.result["version"]) == ("acme/hello", VERSION)
    assert done.cost == pytest.approx(expected_cost(2.5, VERSION), rel=1e-12)
    assert "deadline" not in api.stats()["predictions"][ref]


def test_the_cap_is_the_worst_case_and_the_api_cancels_there(api: ReplicateApi) -> None:
    api.configure(predict_seconds=900.0, polls_to_finish=1)
    paid = provider(api, prices={MODEL: PRICES[MODEL]})
    assert paid.worst_case is not None
    bound = paid.worst_case(REQUEST)
    done = paid.status(paid.submit(REQUEST, "token-capped"))
    assert done.result["status"] == "canceled" and done.state is RemoteState.FAILED
    assert done.cost == pytest.approx(bound, rel=1e-12) and done.result["predict_time"] == 600


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r.update(version=VERSION), "request"),
        (lambda r: r.update(model="acme/video/extra"), "model"),
        (lambda r: r.update(model="../etc"), "model"),
        (lambda r: (r.pop("model"), r.update(version="abc")), "version"),
        (lambda r: r.update(metadata={"a": 1}), "request"),
        (lambda r: r.update(input=["prompt"]), "input"),
        (lambda r: r["input"].update(idempotency_token="mine"), "input.idempotency_token"),
        (lambda r: r["input"].update(strength=math.nan), "input"),
        (lambda r: r.update(webhook="http://example.com/hook"), "webhook"),
        (lambda r: r.update(webhook_events_filter=["done"]), "webhook_events_filter"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_sent(api: ReplicateApi, change: Any, named: str) -> None:
    request = copy.deepcopy(REQUEST)
    change(request)
    with pytest.raises(InvalidRequest, match=": " + re.escape(named) + ":"):
        provider(api).validate(request)
    with pytest.raises(ProviderRejected, match=": " + re.escape(named) + ":"):
        provider(api).submit(request, "token-bad")
    assert api.stats()["submissions"] == 0


def test_an_unpriced_model_is_refused_before_anything_is_sent(api: ReplicateApi) -> None:
    request = {"model": "acme/unpriced", "input": {}}
    with pytest.raises(ProviderRejected, match="acme/unpriced"):
        provider(api).submit(request, "token-unpriced")
    with pytest.raises(InvalidConfiguration, match="acme/unpriced"):
        provider(api).validate(request)
    assert api.stats()["submissions"] == 0


def test_webhook_fields_are_passed_through(api: ReplicateApi) -> None:
    request = {**REQUEST, "webhook": "https://hooks.example.com/r?run=7", "webhook_events_filter": ["completed"]}
    assert api.accepted() == 0
    provider(api).submit(request, "token-webhook")
    assert api.accepted("token-webhook") == 1


@pytest.mark.parametrize(
    ("fault", "error", "created"),
    [
        ("429", ProviderUnavailable, 0),
        ("500", ProviderOutcomeUnknown, 0),  # a 5xx never says whether it created the prediction
        ("503", ProviderOutcomeUnknown, 0),
        ("429_after_accept", ProviderUnavailable, 1),  # classify's rule: 429 means "not processed"
        ("500_after_accept", ProviderOutcomeUnknown, 1),
        ("503_after_accept", ProviderOutcomeUnknown, 1),
        ("408_after_accept", ProviderOutcomeUnknown, 1),
        ("409_after_accept", ProviderOutcomeUnknown, 1),
        ("drop_after_accept", ProviderOutcomeUnknown, 1),
        ("slow", ProviderOutcomeUnknown, 1),  # past the client's read timeout
        ("unreadable_after_accept", ProviderOutcomeUnknown, 1),
        ("text_created_at_after_accept", ProviderOutcomeUnknown, 1),
        ("other_token_after_accept", ProviderOutcomeUnknown, 1),
    ],
)
def test_each_answer_of_the_create_call_is_classified(
    api: ReplicateApi, fault: str, error: type[Exception], created: int
) -> None:
    api.configure(fault=fault, slow_seconds=1.5)
    with pytest.raises(error):
        provider(api, timeout=0.5).submit(REQUEST, f"token-{fault}")
    assert api.stats()["submissions"] == 1, "sent once: the SDK never retries a POST"
    assert api.accepted() == created


def test_connection_errors_are_read_by_their_cause(api: ReplicateApi) -> None:
    """Not sent: refused, connect timeout, pool timeout. Maybe sent: read timeout, dropped connection."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert _classified(Client("r8_k", base_url=f"http://127.0.0.1:{port}")) == (ProviderUnavailable, "ConnectError")

    with socket.socket() as full:  # backlog 0, filled: the next SYN is never answered
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        waiting = [socket.socket() for _ in range(4)]
        for extra in waiting:
            extra.setblocking(False)
            extra.connect_ex(full.getsockname())
        slow = Client("r8_k", base_url=f"http://127.0.0.1:{full.getsockname()[1]}", timeout=httpx.Timeout(0.3))
        assert _classified(slow) == (ProviderUnavailable, "ConnectTimeout")
        for sock in waiting:
            sock.close()

    api.configure(fault="slow", fault_times=-1, slow_seconds=1.5)
    shared = Client(
        api.api_token,
        base_url=api.url,
        timeout=httpx.Timeout(3.0, pool=0.2),
        transport=httpx.HTTPTransport(limits=httpx.Limits(max_connections=1)),  # the SDK wraps it
    )
    holder = threading.Thread(target=_create, args=(shared,))
    holder.start()
    while api.stats()["submissions"] == 0:
        threading.Event().wait(0.01)
    assert _classified(shared) == (ProviderUnavailable, "PoolTimeout")
    holder.join()

    short = Client(api.api_token, base_url=api.url, timeout=httpx.Timeout(0.5))
    assert _classified(short) == (ProviderOutcomeUnknown, "ReadTimeout")
    api.configure(fault="drop_after_accept", fault_times=1)
    assert _classified(short) == (ProviderOutcomeUnknown, "RemoteProtocolError")
    assert type(classify(RuntimeError("a bug"), "x")) is ProviderOutcomeUnknown


def _create(client: Client) -> None:
    client._request("POST", f"/v1/models/{MODEL}/predictions", json={"input": {}})


def _classified(client: Client) -> tuple[type[ProviderError], str]:
    try:
        _create(client)
    except Exception as exc:
        return type(classify(exc, "create")), type(exc).__name__
    raise AssertionError("the call succeeded")


@pytest.mark.parametrize(
    ("end_as", "reads", "status", "state", "cost", "error"),
    [
        ("succeeded", 1, "starting", RemoteState.PENDING, None, None),
        ("succeeded", 2, "processing", RemoteState.RUNNING, None, None),
        ("succeeded", 3, "succeeded", RemoteState.SUCCEEDED, expected_cost(2.5), None),
        ("failed", 3, "failed", RemoteState.FAILED, expected_cost(2.5), "the prediction failed: CUDA out of memory"),
        ("canceled", 3, "canceled", RemoteState.FAILED, expected_cost(2.5), "canceled"),
        ("aborted", 3, "aborted", RemoteState.FAILED, 0.0, "aborted before it started running"),
    ],
)
def test_every_status_maps_to_a_state_and_a_cost(
    api: ReplicateApi, end_as: str, reads: int, status: str, state: RemoteState, cost: float | None, error: str | None
) -> None:
    api.configure(end_as=end_as, starting_polls=1, polls_to_finish=3)
    paid = provider(api)
    ref = paid.submit(REQUEST, "token-status")
    seen = [paid.status(ref) for _ in range(reads)][-1]
    assert (seen.result["status"], seen.state) == (status, state)
    assert seen.cost == (pytest.approx(cost, rel=1e-12) if cost else cost)
    assert (seen.error is None) is (error is None) and (seen.error or "").startswith(error or "")
    assert ("output" in seen.result) is (status == "succeeded")


@pytest.mark.parametrize(
    ("raw", "check"),
    [
        ("1e999", math.isinf),
        ("NaN", math.isnan),
        ('"fast"', math.isnan),
        ("-3", lambda cost: cost < 0),
        ("123456789012345678901234567890123456789012345678", math.isnan),
    ],
)
def test_an_odd_predict_time_is_an_odd_cost_never_a_crash(api: ReplicateApi, raw: str, check: Any) -> None:
    """The ledger records a NaN, infinite or negative cost as an anomaly and keeps the prediction."""
    api.configure(polls_to_finish=1, predict_time_raw=raw)
    paid = provider(api, prices={MODEL: {"per_second": 0.002}})
    done = paid.status(paid.submit(REQUEST, "token-odd"))
    assert done.state is RemoteState.SUCCEEDED and done.cost is not None and check(done.cost)
    assert done.result["predict_time"] is None or done.result["predict_time"] < 0


def test_bad_reads_are_errors_never_states(api: ReplicateApi) -> None:
    paid = provider(api)
    ref = paid.submit(REQUEST, "token-reads")
    api.configure(status_faults=["html"])
    with pytest.raises(ProviderError, match="not JSON"):
        paid.status(ref)
    api.configure(status_faults=["malformed"])
    with pytest.raises(ProviderError, match="not a known status"):
        paid.status(ref)
    with pytest.raises(ProviderRejected, match="HTTP 404"):
        paid.status("nosuchprediction")
    with pytest.raises(ProviderError, match="not a prediction id"):
        paid.status("../../v1/account")
    assert api.stats()["status_calls"] == 2  # an id the API does not know, or we refuse, is no get


def test_the_token_never_appears_in_an_error_or_a_log(api: ReplicateApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api.configure(echo_token=True)
    wrong = ReplicatePredictionProvider(api_token="r8_wrong0token0777888999", base_url=api.url, prices=PRICES)
    texts = []
    for attempt in (lambda: wrong.submit(REQUEST, "t1"), lambda: wrong.status("abc"), lambda: wrong.find("t1")):
        with pytest.raises(ProviderError) as raised:
            attempt()
        texts.append(str(raised.value))
    paid = provider(api)
    api.configure(fault="500_after_accept")
    with pytest.raises(ProviderOutcomeUnknown) as lost:
        paid.submit(REQUEST, "t2")
    texts.append(str(lost.value))
    api.configure(status_errors=[404])
    with pytest.raises(ProviderRejected) as gone:
        paid.status("abc")
    texts += [str(gone.value), repr(paid), repr(paid.billing_identity())]
    assert "<redacted>" in texts[0] and "<redacted>" in texts[3]
    for secret in ("r8_wrong0token0777888999", "wrong0token0777888999", api.api_token, api.api_token[3:]):
        assert not any(secret in text for text in texts), texts
        assert secret not in caplog.text
    assert paid.billing_identity()["key_sha256"] and paid.billing_identity()["api"] == "replicate"


def test_a_base_url_with_v1_works_and_settings_that_cannot_work_name_their_field(api: ReplicateApi) -> None:
    paid = provider(api, base_url=api.url + "/v1/")
    assert paid.status(paid.submit(REQUEST, "token-v1")).state is RemoteState.RUNNING
    for options, field in (
        ({"api_token": ""}, "api_token"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"token_input": "a-b"}, "token_input"),
        ({"max_pages": 0}, "max_pages"),
        ({"timeout": True}, "timeout"),
        ({"prices": {}}, "prices"),
        ({"prices": {"not a model": {"per_second": 1}}}, "prices"),
        ({"prices": {MODEL: {"per_second": -1}}}, f"{MODEL}.per_second"),
        ({"prices": {MODEL: {"per_second": 1, "max_seconds": 3}}}, f"{MODEL}.max_seconds"),
        ({"prices": {MODEL: {"per_minute": 1}}}, MODEL),
    ):
        settings: dict[str, Any] = {"api_token": "r8_k", "prices": PRICES, **options}
        with pytest.raises(InvalidConfiguration) as refused:
            ReplicatePredictionProvider(**settings)
        assert refused.value.field == field and "\n" not in str(refused.value)


def test_without_token_input_the_input_is_sent_untouched_and_there_is_no_lookup(api: ReplicateApi) -> None:
    paid = provider(api, token_input=None)
    assert not paid.capabilities.lookup and not paid.capabilities.idempotent_tokens
    ref = paid.submit(REQUEST, "token-plain")
    assert api.stats()["predictions"][ref]["input"] == REQUEST["input"]
    with pytest.raises(ProviderOutcomeUnknown, match="no lookup"):
        paid.find("token-plain")
