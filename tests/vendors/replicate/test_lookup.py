"""A retry after a lost create answer, through `SubmissionLedger.submit` and a fresh provider each time.

The lookup (`vendors.replicate.lookup`) adopts the prediction whose input carries the token; it
rules out predictions carrying another token, made on the web or through a deployment, and older
than the window; anything else in the window (another client's untagged API prediction, an input
removed after an hour, an API that dropped the token field) keeps the submission unknown. Every
listing that proves nothing is "unknown", never "no prediction". Other clients' predictions are seeded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import SubmissionState, SubmissionStateUnknown, open_store
from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi
from tests.vendors.replicate.support import REQUEST, provider


@pytest.fixture
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(polls_to_finish=2) as running:
        yield running


class Episode:
    """One episode of a fresh file store, whose first submit lost its answer (the API's fault ``fault``)."""

    def __init__(self, api: ReplicateApi, tmp_path: Path, fault: str, **options: Any) -> None:
        self.api, self.options = api, dict(options)
        self.store = open_store(tmp_path / "store")
        self.eid = self.store.allocate("2026-W32", "weekly-image").episode_id
        self.token = idempotency_token(self.store.identity, self.eid)
        api.configure(fault=fault, fault_times=1)
        with pytest.raises(ProviderOutcomeUnknown):
            self.retry()
        assert self.state() is SubmissionState.UNKNOWN

    def retry(self) -> str | None:
        """``ledger.submit`` with a fresh provider (a retry knows nothing of the first try); the remote ref."""
        episode = SubmissionLedger(self.store).submit(self.eid, provider(self.api, **self.options), REQUEST)
        return episode.submission.remote_ref

    def state(self) -> SubmissionState:
        return self.store.get(self.eid).submission.state


def test_a_lost_answer_is_adopted_and_never_paid_twice(api: ReplicateApi, tmp_path: Path) -> None:
    theirs = api.seed(input={"prompt": "x", "idempotency_token": "another-episode"})
    episode = Episode(api, tmp_path, "drop_after_accept")
    ours = api.predictions_for(episode.token)
    assert len(ours) == 1
    assert episode.retry() == ours[0] != theirs
    assert api.stats()["submissions"] == 1 and api.accepted() == 1
    assert episode.state() is SubmissionState.ACCEPTED


def test_predictions_proven_anothers_let_the_retry_submit_once(api: ReplicateApi, tmp_path: Path) -> None:
    old = api.seed(age_seconds=7200)  # before the window (intent - 5 min): never a candidate
    api.seed(source="web")  # ours are made through the API
    api.seed(deployment="acme/my-deployment")  # ours never go through a deployment
    api.seed(input={"prompt": "y", "idempotency_token": "aij-another-episode"})
    episode = Episode(api, tmp_path, "500")  # refused before creating: no prediction, but the ledger cannot know
    ref = episode.retry()
    assert api.predictions_for(episode.token) == [ref] and ref != old
    assert api.stats()["submissions"] == 2 and api.accepted() == 1  # the refused one and this one


def test_another_clients_untagged_prediction_in_the_window_keeps_it_unknown(api: ReplicateApi, tmp_path: Path) -> None:
    episode = Episode(api, tmp_path, "500")
    theirs = api.seed(input={"prompt": "someone else's"})
    with pytest.raises(ProviderOutcomeUnknown, match=f"{theirs} .* has no idempotency_token in its input"):
        episode.retry()
    assert api.accepted() == 0 and episode.state() is SubmissionState.UNKNOWN


def test_a_removed_input_keeps_it_unknown(api: ReplicateApi, tmp_path: Path) -> None:
    episode = Episode(api, tmp_path, "drop_after_accept")
    (ours,) = api.predictions_for(episode.token)
    api.configure(removed=[ours])  # an hour later: input, output and logs are gone
    with pytest.raises(ProviderOutcomeUnknown, match=f"{ours} .* has its input removed"):
        episode.retry()
    assert api.accepted() == 1


def test_an_api_that_drops_the_token_field_is_never_read_as_no_prediction(api: ReplicateApi, tmp_path: Path) -> None:
    """Whether unknown inputs are shown back is undocumented: without the echo, nothing is proven either way."""
    api.configure(strip_inputs=["idempotency_token"])
    episode = Episode(api, tmp_path, "drop_after_accept")
    with pytest.raises(ProviderOutcomeUnknown, match="cannot be ruled out"):
        episode.retry()
    assert api.accepted() == 1 and len(api.predictions_for(episode.token)) == 1


@pytest.mark.parametrize(
    "fault",
    [
        "500",
        "401",
        "stray_404",
        "malformed",
        "html",
        "text_created_at",
        "huge_created_at",
        "out_of_order",
        "duplicate",
        "loop_next",
        "foreign_path_next",
    ],
)
def test_a_listing_that_proves_nothing_is_unknown(api: ReplicateApi, tmp_path: Path, fault: str) -> None:
    api.seed(input={"idempotency_token": "a"})
    api.seed(input={"idempotency_token": "b"})
    api.configure(page_size=2)
    episode = Episode(api, tmp_path, "500")
    api.seed(input={"idempotency_token": "c"})  # three in the window: a second page
    api.configure(page_faults=[fault])
    with pytest.raises(ProviderOutcomeUnknown, match="listing"):
        episode.retry()
    assert api.stats()["submissions"] == 1 and episode.state() is SubmissionState.UNKNOWN


def test_a_listing_whose_next_never_ends_is_cut_short(api: ReplicateApi, tmp_path: Path) -> None:
    episode = Episode(api, tmp_path, "500", max_pages=3)
    api.configure(endless_next=True)
    with pytest.raises(ProviderOutcomeUnknown, match="cut short after 3 pages"):
        episode.retry()
    assert api.stats()["list_calls"] == 3 and api.accepted() == 0


def test_pages_are_read_from_our_base_url_whatever_host_next_names(api: ReplicateApi, tmp_path: Path) -> None:
    with ReplicateApi(api_token="r8_elsewhere0000000000") as elsewhere:
        api.configure(page_size=1, next_base=elsewhere.url)
        episode = Episode(api, tmp_path, "drop_after_accept")
        for n in range(3):
            api.seed(input={"idempotency_token": f"other-{n}"})  # newer than ours: ours is on page 4
        assert episode.retry() == api.predictions_for(episode.token)[0]
        assert elsewhere.stats()["unauthorized"] == 0 and api.stats()["list_calls"] == 4


def test_the_apis_clock_running_behind_is_within_the_skew(api: ReplicateApi, tmp_path: Path) -> None:
    """The API stamps our prediction 4 minutes before our intent: the 5-minute skew still sees it."""
    api.configure(clock_offset=-240.0)
    episode = Episode(api, tmp_path, "drop_after_accept")
    assert episode.retry() == api.predictions_for(episode.token)[0]
    assert api.accepted() == 1


def test_without_token_input_a_lost_answer_waits_for_reconcile(api: ReplicateApi, tmp_path: Path) -> None:
    """Capability (c): no lookup, so the ledger refuses to guess and names the reconcile command."""
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", "weekly-image").episode_id
    api.configure(fault="drop_after_accept")
    for _ in range(2):  # the lost answer, then a retry
        with pytest.raises(SubmissionStateUnknown, match=f"idempotent-jobs reconcile {eid}"):
            SubmissionLedger(store).submit(eid, provider(api, token_input=None), REQUEST)
    assert store.get(eid).submission.state is SubmissionState.UNKNOWN
    assert api.accepted() == 1 and api.stats()["list_calls"] == 0
