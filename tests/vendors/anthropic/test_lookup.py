"""A retry after a lost create answer, through `SubmissionLedger.submit` and a fresh provider each time.

The lookup (`vendors.anthropic.lookup`) adopts the token's batch once it has ended; while any batch
of the window (ours or another client's) is in progress it says "unknown" and nothing is billed;
once that batch ended as another's, the retry submits exactly once. Every listing or results
answer that proves nothing is "unknown", never "no batch". Other clients' batches are seeded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import SubmissionState, open_store
from airflow_idempotent_jobs.errors import ProviderOutcomeUnknown
from airflow_idempotent_jobs.paid import SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.testing.anthropic_api import AnthropicApi
from tests.vendors.anthropic.support import REQUEST, provider, tag


@pytest.fixture
def api() -> Iterator[AnthropicApi]:
    with AnthropicApi(seconds_to_finish=0.0) as running:  # a batch not held in progress ends on any read
        yield running


class Episode:
    """One episode of a fresh file store, whose first submit lost its answer (the API's fault ``fault``)."""

    def __init__(self, api: AnthropicApi, tmp_path: Path, fault: str, **options: object) -> None:
        self.api, self.options = api, {"read_retries": 0, **options}
        self.store = open_store(tmp_path / "store")
        self.eid = self.store.allocate("2026-W32", "weekly-batch").episode_id
        self.token = idempotency_token(self.store.identity, self.eid)
        api.configure(fault=fault, fault_times=1)
        with pytest.raises(ProviderOutcomeUnknown):
            self.retry()
        assert self.state() is SubmissionState.UNKNOWN

    def retry(self) -> str | None:
        """``ledger.submit`` with a fresh provider (a retry knows nothing of the first try); the remote ref."""
        episode = SubmissionLedger(self.store).submit(self.eid, provider(self.api, **self.options), REQUEST)  # type: ignore[arg-type]
        return episode.submission.remote_ref

    def state(self) -> SubmissionState:
        return self.store.get(self.eid).submission.state


def test_a_lost_answer_is_adopted_once_the_batch_ended_and_unknown_before(api: AnthropicApi, tmp_path: Path) -> None:
    api.configure(hold_new=True)
    episode = Episode(api, tmp_path, "drop_after_accept")
    ours = api.batches_for(tag(episode.token))
    assert len(ours) == 1
    with pytest.raises(ProviderOutcomeUnknown, match=f"{ours[0]} is in_progress"):
        episode.retry()
    assert api.stats()["submissions"] == 1 and episode.state() is SubmissionState.UNKNOWN
    api.configure(in_progress=[], hold_new=False)
    assert episode.retry() == ours[0]
    assert api.stats()["submissions"] == 1 and api.accepted() == 1


def test_another_clients_batch_in_progress_blocks_then_the_retry_submits_once(
    api: AnthropicApi, tmp_path: Path
) -> None:
    old = api.seed(ended=False, age_seconds=7200)  # before the window: never a candidate
    api.seed(custom_ids=["ij0123456789abcdef0123_x", "theirs"], ended=True)  # another token's tag: ruled out
    theirs = api.seed(ended=False)
    episode = Episode(api, tmp_path, "500")  # refused before creating: no batch, but the ledger cannot know
    with pytest.raises(ProviderOutcomeUnknown, match=theirs) as blocked:
        episode.retry()
    assert old not in str(blocked.value)
    assert api.accepted() == 0
    api.configure(in_progress=[old])
    ref = episode.retry()
    assert api.accepted(tag(episode.token)) == 1 and api.batches_for(tag(episode.token)) == [ref]
    assert episode.retry() == ref and api.stats()["submissions"] == 2  # the first (refused) and this one


@pytest.mark.parametrize(
    "fault", ["500", "529", "stray_404", "malformed", "huge_created_at", "text_created_at", "out_of_order", "html"]
)
def test_a_listing_that_proves_nothing_is_unknown(api: AnthropicApi, tmp_path: Path, fault: str) -> None:
    api.seed(ended=True)
    api.seed(ended=True)
    episode = Episode(api, tmp_path, "500")
    api.configure(page_faults=[fault])
    with pytest.raises(ProviderOutcomeUnknown, match="listing"):
        episode.retry()
    assert api.stats()["submissions"] == 1 and episode.state() is SubmissionState.UNKNOWN


@pytest.mark.parametrize("results", [["gone"], ["500"], ["malformed"], ["html"]])
def test_a_candidate_whose_results_cannot_be_read_is_unknown(
    api: AnthropicApi, tmp_path: Path, results: list[str]
) -> None:
    api.seed(ended=True)
    episode = Episode(api, tmp_path, "500")
    api.configure(results_faults=results)
    with pytest.raises(ProviderOutcomeUnknown, match="cannot be ruled out"):
        episode.retry()
    assert api.stats()["submissions"] == 1


def test_archived_results_and_a_cut_short_listing_are_unknown(api: AnthropicApi, tmp_path: Path) -> None:
    archived = api.seed(ended=True)
    episode = Episode(api, tmp_path, "500", max_pages=1, page_size=1)
    api.seed(ended=True)
    with pytest.raises(ProviderOutcomeUnknown, match="cut short after 1 pages"):
        episode.retry()
    episode.options = {"read_retries": 0}
    api.configure(gone=[archived])
    with pytest.raises(ProviderOutcomeUnknown, match=f"{archived} ended, but its results are gone"):
        episode.retry()
    api.configure(page_faults=["no_cursor"])
    with pytest.raises(ProviderOutcomeUnknown, match="last_id"):
        episode.retry()
    assert api.stats()["submissions"] == 1


def test_the_apis_clock_running_behind_is_within_the_skew(api: AnthropicApi, tmp_path: Path) -> None:
    """The API stamps our batch 4 minutes before our intent: the 5-minute skew still sees it."""
    api.configure(clock_offset=-240.0)
    episode = Episode(api, tmp_path, "drop_after_accept")
    ours = api.batches_for(tag(episode.token))
    assert episode.retry() == ours[0]
    assert api.accepted() == 1
