"""The async invoke lookup (ListAsyncInvokes), the second line of defence behind the token: real boto3 at the
double. Through the ledger, a retry adopts the invocation its lost call made even when the API has
forgotten the token; a listing that proves nothing leaves the token to do its work."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.testing.bedrock_api import BedrockRuntimeApi
from airflow_idempotent_jobs.vendors.bedrock import BedrockAsyncInvokeProvider, client_request_token
from tests.vendors.bedrock.support import PRICES, START, runtime_client

SINCE = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)


@pytest.fixture
def api() -> Iterator[BedrockRuntimeApi]:
    with BedrockRuntimeApi(polls_to_finish=1) as server:
        yield server


def provider(api: BedrockRuntimeApi, **listing: float) -> BedrockAsyncInvokeProvider:
    return BedrockAsyncInvokeProvider(lambda: runtime_client(api.url), prices=PRICES, **listing)  # type: ignore[arg-type]


def start_without_token(api: BedrockRuntimeApi) -> None:
    """An invocation another client started with no clientRequestToken (boto3 would fill one in)."""
    body = {key: START[key] for key in ("modelId", "modelInput", "outputDataConfig")}
    headers = {"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDOTHER/20261206/us-east-1/bedrock/aws4_request"}
    httpx.post(api.url + "/async-invoke", json=body, headers=headers, timeout=5).raise_for_status()


def lost_on_every_attempt(api: BedrockRuntimeApi, store_path: Path, fault: str) -> tuple[SubmissionLedger, str, str]:
    """A ledger submit whose every boto3 attempt loses its answer (the invocation made): the ledger, the
    episode and the token as sent."""
    store = open_store(store_path)
    eid = store.allocate("2026-W32", fault).episode_id
    ledger, adapter = SubmissionLedger(store), provider(api)
    api.configure(fault=fault, fault_times=3)
    with pytest.raises(ProviderOutcomeUnknown):
        ledger.submit(eid, adapter, START, estimated_cost=adapter.worst_case(START))
    return ledger, eid, client_request_token(idempotency_token(store.identity, eid))


def test_a_retry_adopts_the_invocation_even_when_the_api_forgot_the_token(
    api: BedrockRuntimeApi, tmp_path: Path
) -> None:
    ledger, eid, token = lost_on_every_attempt(api, tmp_path / "store", "drop_after_accept")
    assert api.accepted(token) == 1
    api.configure(honour_tokens=False)  # the API no longer remembers the token: a resend would pay again
    resumed = ledger.submit(eid, provider(api), START)
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert "found by token lookup" in [entry["note"] for entry in resumed.submission.history]
    assert api.accepted(token) == 1 and api.stats()["submissions"] == 3  # boto3's three attempts, no more


def test_a_listing_that_cannot_rule_one_out_proves_nothing_and_the_token_is_resent(
    api: BedrockRuntimeApi, tmp_path: Path
) -> None:
    ledger, eid, token = lost_on_every_attempt(api, tmp_path / "store", "503_after_accept")
    start_without_token(api)  # newer than ours: the listing meets it first
    resumed = ledger.submit(eid, provider(api), START)
    notes = [entry["note"] for entry in resumed.submission.history]
    assert any(note.startswith("token lookup proved nothing (") and "carries no token" in note for note in notes)
    assert resumed.submission.state is SubmissionState.ACCEPTED and api.accepted(token) == 1


def test_no_invocation_only_when_every_one_in_the_window_is_ruled_out(api: BedrockRuntimeApi) -> None:
    adapter = provider(api, page_size=2)
    for number in range(5):
        adapter.submit(START, f"another-{number}")
    assert adapter.find_since("ours", SINCE) is None  # three pages, every summary another token's
    ours = adapter.submit(START, "ours")
    for number in range(5, 9):
        adapter.submit(START, f"another-{number}")
    assert adapter.find_since("ours", SINCE) == ours == adapter.find("ours")


def test_a_listing_cut_short_failed_or_untokened_proves_nothing(api: BedrockRuntimeApi) -> None:
    adapter = provider(api, page_size=1)
    for number in range(3):
        adapter.submit(START, f"another-{number}")
    with pytest.raises(ProviderOutcomeUnknown, match=r"cut short after 2 pages"):
        provider(api, page_size=1, max_pages=2).find_since("ours", SINCE)
    api.configure(lookup_errors=[500, 500, 500])  # each of boto3's three attempts
    with pytest.raises(ProviderOutcomeUnknown, match="page 1 failed"):
        adapter.find_since("ours", SINCE)
    start_without_token(api)
    with pytest.raises(ProviderOutcomeUnknown, match="carries no token"):
        adapter.find_since("ours", SINCE)


def test_the_listing_starts_at_the_intent_less_the_skew(api: BedrockRuntimeApi) -> None:
    adapter = provider(api)
    old = adapter.submit(START, "ours-long-ago")
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=10)
    assert provider(api, clock_skew=0).find_since("ours-long-ago", later) is None  # before the window
    assert provider(api, clock_skew=3600).find_since("ours-long-ago", later) == old
