"""Lookup by listing: a lost create is adopted by the retry, "no batch" only when the listing proves it.

"No batch" is proven by reaching a batch older than the token's first intent (less the clock skew)
or the listing's end; every listing that does not prove it (cut short, failing, unreadable, out of
order, another service's 404, a ``created_at`` of 1e999 or text) is `ProviderOutcomeUnknown`, and
the token's batch always lies further down the listing here, so a None would be a double payment.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing.context
from pathlib import Path

import openai
import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors.openai import TOKEN_KEY, OpenAIBatchProvider
from tests.vendors.openai._child import REQUEST
from tests.vendors.openai.conftest import start_step
from tests.vendors.openai.support import PRICES, provider

TOKEN = "aij-2026-W32-0-lookup"


def test_a_lost_create_is_adopted_by_the_retry_in_a_fresh_process(
    forkserver: multiprocessing.context.ForkServerContext, api: OpenAIApi, tmp_path: Path
) -> None:
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", "lost").episode_id
    token = idempotency_token(store.identity, eid)
    api.seed(3, age_seconds=7200)  # older batches: the lookup stops at them
    api.configure(fault="drop_after_accept", fault_times=1)
    with pytest.raises(ProviderOutcomeUnknown, match="no answer after sending"):
        SubmissionLedger(store).submit(eid, provider(api), REQUEST)
    assert store.get(eid).submission.state is SubmissionState.UNKNOWN
    (lost,) = api.batches_for(token)
    spec = {"store": str(tmp_path / "store"), "episode": eid, "api_key": api.api_key, "base_url": api.base_url}
    retry = start_step(forkserver, {**spec, "poll": True}, tmp_path / "retry.json")
    retry.join(30)
    out = json.loads((tmp_path / "retry.json").read_text())
    assert retry.exitcode == 0, out
    assert (out["state"], out["remote_ref"]) == ("succeeded", lost)
    assert api.accepted(token) == 1 and api.stats()["uploads"] == 1


def seeded(api: OpenAIApi, ages: list[int], token_age: int | None) -> None:
    """Batches made ``ages`` seconds ago (distinct times, so their order is known), the token's at ``token_age``."""
    for age in sorted({*ages, *([token_age] if token_age else [])}, reverse=True):
        api.seed(1, age_seconds=age, metadata={TOKEN_KEY: TOKEN} if age == token_age else {"other": str(age)})


def since(seconds_ago: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds_ago)


def test_no_batch_is_proven_by_reaching_an_older_batch(api: OpenAIApi) -> None:
    seeded(api, [10, 20, 30, 40, 50_000, 60_000, 70_000], token_age=None)
    adapter = provider(api, page_size=2, clock_skew=60)
    assert adapter.find_since(TOKEN, since(600)) is None
    assert api.stats()["lookup_calls"] == 3  # the third page reached a batch from before the intent


def test_no_batch_is_proven_by_the_end_of_the_listing(api: OpenAIApi) -> None:
    seeded(api, [10, 20, 30], token_age=None)
    assert provider(api, page_size=2).find(TOKEN) is None
    assert api.stats()["lookup_calls"] == 2


def test_the_tokens_batch_is_found_pages_down(api: OpenAIApi) -> None:
    seeded(api, [10, 20, 30, 40, 50], token_age=45)
    (found,) = [i for i, b in api.stats()["batches"].items() if b["metadata"].get(TOKEN_KEY) == TOKEN]
    assert provider(api, page_size=2).find_since(TOKEN, since(600)) == found
    assert provider(api, page_size=2).find(TOKEN) == found


def test_a_listing_cut_short_proves_nothing(api: OpenAIApi) -> None:
    seeded(api, [10, 20, 30, 40, 50], token_age=45)
    with pytest.raises(ProviderOutcomeUnknown, match="2 pages of batches listed"):
        provider(api, page_size=2, max_pages=2).find(TOKEN)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("500", "HTTP 500"),
        ("503", "HTTP 503"),
        ("foreign_404", "HTTP 404"),
        ("malformed", "not a list page"),
        ("out_of_order", "out of order"),
        ("repeat", "listed twice"),
        ("created_at_inf", "created_at inf is not a plausible Unix time"),
        ("created_at_text", "created_at 'yesterday' is not a plausible Unix time"),
        ("metadata_not_text", "metadata is not a map of strings"),
    ],
)
def test_a_page_that_cannot_be_followed_proves_nothing(api: OpenAIApi, fault: str, said: str) -> None:
    seeded(api, [10, 20, 30, 40], token_age=50)
    api.configure(list_fault=fault, list_fault_times=-1, list_fault_skip=1)  # the second page, every time
    client = openai.OpenAI(api_key=api.api_key, base_url=api.base_url, timeout=2.0, max_retries=0)
    adapter = OpenAIBatchProvider(prices=PRICES, client_factory=lambda: client, page_size=2)
    with pytest.raises(ProviderOutcomeUnknown, match=said):
        adapter.find_since(TOKEN, since(600))


def test_a_failing_page_is_retried_by_the_sdk_and_then_proves_nothing(api: OpenAIApi) -> None:
    seeded(api, [10, 20], token_age=30)
    api.configure(list_fault="503", list_fault_times=1)
    assert provider(api, page_size=2).find(TOKEN) is not None  # one 503: the SDK's retry reads the page
    api.configure(list_fault="503", list_fault_times=-1)
    with pytest.raises(ProviderOutcomeUnknown, match="nothing is proven"):
        provider(api, page_size=2).find(TOKEN)
