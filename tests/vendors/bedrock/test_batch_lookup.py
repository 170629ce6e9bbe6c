"""``find``: a token's batch inference job by ListModelInvocationJobs(nameContains=<the token's tag>).

None ("no job": the ledger then submits once) only when every page answered with its list and the last
carried no nextToken; a job is ours only with our token AND our name. Everything else, including a
listing that lies (another token echoed, none, a nextToken that never ends or comes again), is
`ProviderOutcomeUnknown`, and nothing is sent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.testing.bedrock_control_api import BedrockControlApi
from airflow_idempotent_jobs.vendors.bedrock.batch_inference import batch_job_name
from tests.vendors.bedrock.batch_support import JOB, batch_provider_at, control_client

TOKEN = "aij-2026-W32-0-9571a9523877e32c"
NEVER = "aij-2026-W32-7-000000000000000000"


@pytest.fixture
def api() -> Iterator[BedrockControlApi]:
    with BedrockControlApi(polls_to_finish=2) as server:
        yield server


def lost_submit(api: BedrockControlApi, token: str = TOKEN) -> str:
    """A job made for ``token`` whose every answer was lost: only the lookup can name it."""
    api.configure(fault="drop_after_accept", fault_times=3)
    with pytest.raises(ProviderOutcomeUnknown):
        batch_provider_at(api.url).submit(JOB, token)
    (arn,) = api.stats()["jobs"]
    return str(arn)


def others(api: BedrockControlApi, count: int) -> None:
    """Jobs of other episodes on the same account."""
    client = control_client(api.url)
    for n in range(count):
        client.create_model_invocation_job(clientRequestToken=f"other{n}", **{**JOB, "jobName": f"other-{n}"})


def test_a_token_never_used_is_proven_to_have_no_job(api: BedrockControlApi) -> None:
    others(api, 3)
    assert batch_provider_at(api.url).find(NEVER) is None
    assert api.stats()["lookup_calls"] == 1  # the name filter leaves one page


def test_a_lost_submits_job_is_found_by_find_and_find_since(api: BedrockControlApi) -> None:
    arn = lost_submit(api)
    others(api, 2)
    adapter = batch_provider_at(api.url)
    assert adapter.find(TOKEN) == arn
    assert adapter.find_since(TOKEN, dt.datetime.now(dt.timezone.utc)) == arn  # within the clock skew


def test_find_since_lists_only_from_the_intent_on(api: BedrockControlApi) -> None:
    lost_submit(api)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    assert batch_provider_at(api.url, clock_skew=0).find_since(TOKEN, later) is None


def test_an_api_ignoring_the_name_filter_is_walked_page_by_page(api: BedrockControlApi) -> None:
    arn = lost_submit(api)
    others(api, 5)
    api.configure(listing="unfiltered")
    assert batch_provider_at(api.url, page_size=2).find(TOKEN) == arn  # newest first: ours on page 3
    assert api.stats()["lookup_calls"] == 3
    assert batch_provider_at(api.url, page_size=2).find(NEVER) is None  # every page ruled out, to the end
    with pytest.raises(ProviderOutcomeUnknown, match="cut short after 2 pages"):
        batch_provider_at(api.url, page_size=2, max_pages=2).find(NEVER)


@pytest.mark.parametrize(
    ("listing", "why"),
    [
        ("endless", "cut short after 4 pages"),
        ("repeat_token", "gives the nextToken '0' again"),
    ],
)
def test_a_listing_that_never_ends_is_unknown_after_bounded_pages(
    api: BedrockControlApi, listing: str, why: str
) -> None:
    api.configure(listing=listing)
    with pytest.raises(ProviderOutcomeUnknown, match=why):
        batch_provider_at(api.url, max_pages=4).find(NEVER)
    assert api.stats()["lookup_calls"] <= 4


@pytest.mark.parametrize(("listing", "why"), [("other_token", "carries another token"), ("no_token", "no token")])
def test_a_listing_that_does_not_show_our_token_for_our_name_is_unknown(
    api: BedrockControlApi, listing: str, why: str
) -> None:
    lost_submit(api)
    api.configure(listing=listing)
    with pytest.raises(ProviderOutcomeUnknown, match=why):
        batch_provider_at(api.url).find(TOKEN)


def test_our_token_under_another_name_is_unknown(api: BedrockControlApi) -> None:
    control_client(api.url).create_model_invocation_job(clientRequestToken=TOKEN, **{**JOB, "jobName": "renamed"})
    api.configure(listing="unfiltered")
    with pytest.raises(ProviderOutcomeUnknown, match="under the name 'renamed'"):
        batch_provider_at(api.url).find(TOKEN)


def test_our_name_under_another_token_is_unknown(api: BedrockControlApi) -> None:
    squatter = {**JOB, "jobName": batch_job_name(TOKEN, "copied")}
    control_client(api.url).create_model_invocation_job(clientRequestToken="someoneelse", **squatter)
    with pytest.raises(ProviderOutcomeUnknown, match="named for this token"):
        batch_provider_at(api.url).find(TOKEN)


@pytest.mark.parametrize("errors", [[500, 500, 500], [400], [403], [404]])
def test_a_listing_that_fails_is_never_no_job(api: BedrockControlApi, errors: list[int]) -> None:
    lost_submit(api)
    api.configure(lookup_errors=errors)
    with pytest.raises(ProviderOutcomeUnknown, match="page 1 failed"):
        batch_provider_at(api.url).find(TOKEN)
    api.configure(lookup_errors=[500])  # one 5xx: boto3's own retry reads the listing
    assert batch_provider_at(api.url).find(TOKEN) is not None
