"""``find_since``: a lookup that lists jobs by time gets the time of the token's first intent.

An API that can only list jobs (OpenAI's batches, Anthropic's message batches) proves "no job" by
listing back to when the token could first have been used: the first ``submitting`` intent. The
ledger passes that time from the record, for a retry and for reconcile alike, and falls back to a
full ``find`` when the record cannot say it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState
from airflow_idempotent_jobs.paid import ProviderOutcomeUnknown, SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.paid.provider import intent_time
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import CAPABILITIES, jobs_for

REQUEST = {"prompt": "a weekly episode"}


class ListingProvider(HttpPaidProvider):
    """The HTTP provider, recording which lookup the ledger chose and with what time."""

    lookups: list[tuple[str, dt.datetime | None]]

    def find_since(self, idempotency_token: str, since: dt.datetime) -> str | None:
        self.lookups.append(("find_since", since))
        return super().find(idempotency_token)

    def find(self, idempotency_token: str) -> str | None:
        self.lookups.append(("find", None))
        return super().find(idempotency_token)


def listing_provider(server: ProviderServer) -> ListingProvider:
    provider = ListingProvider(server.provider_config(), auth_header=server.auth_header, auth_value=server.auth_value)
    provider.lookups = []
    return provider


def lose_a_submit(store: EpisodeStore, server: ProviderServer) -> tuple[str, ListingProvider, dt.datetime]:
    server.configure(**CAPABILITIES["b-lookup"], fault="drop_after_accept", fault_times=1)
    eid = store.allocate("2026-W32", "k").episode_id
    provider = listing_provider(server)
    before = dt.datetime.now(dt.timezone.utc)
    with pytest.raises(ProviderOutcomeUnknown):
        SubmissionLedger(store).submit(eid, provider, REQUEST)
    assert store.get(eid).submission.state is SubmissionState.UNKNOWN
    return eid, provider, before


def test_a_retry_lists_back_to_the_first_intent(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid, provider, before = lose_a_submit(file_store, server)
    first_intent = intent_time(file_store.get(eid).submission.history)
    assert first_intent is not None and before <= first_intent <= dt.datetime.now(dt.timezone.utc)
    resumed = SubmissionLedger(file_store).submit(eid, provider, REQUEST)
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert provider.lookups == [("find_since", first_intent)]
    assert jobs_for(server, idempotency_token(file_store.namespace, eid)) == [resumed.submission.remote_ref]


def test_reconcile_lists_back_to_the_first_intent(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid, provider, _ = lose_a_submit(file_store, server)
    first_intent = intent_time(file_store.get(eid).submission.history)
    settled = SubmissionLedger(file_store).reconcile(eid, provider=provider, settled_by="test")
    assert settled.submission.state is SubmissionState.ACCEPTED
    assert provider.lookups == [("find_since", first_intent)]


def test_a_record_that_cannot_say_when_gets_the_full_lookup(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid, provider, _ = lose_a_submit(file_store, server)

    def without_times(ep: Any) -> Any:
        history = tuple({k: v for k, v in entry.items() if k != "at"} for entry in ep.submission.history)
        return dataclasses.replace(ep, submission=dataclasses.replace(ep.submission, history=history))

    file_store.update(eid, without_times)
    resumed = SubmissionLedger(file_store).submit(eid, provider, REQUEST)
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert provider.lookups == [("find", None)]


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], None),
        (
            [{"from": "none", "to": "submitting", "at": "2026-08-03T10:00:00.000001+00:00"}],
            "2026-08-03T10:00:00.000001",
        ),
        (
            [
                {"from": "none", "to": "submitting", "at": "2026-08-03T12:00:00+02:00"},
                {"from": "submitting", "to": "unknown", "at": "2026-08-03T10:05:00+00:00"},
                {"from": "unknown", "to": "submitting", "at": "2026-08-03T10:09:00+00:00"},
            ],
            "2026-08-03T10:00:00",
        ),
        ([{"from": "none", "to": "submitting", "at": "2026-08-03T10:00:00"}], None),  # naive: no proof of when
        ([{"from": "none", "to": "submitting", "at": "yesterday"}], None),
        ([{"from": "none", "to": "submitting", "at": 1_780_000_000}], None),
        ([{"from": "none", "to": "submitting"}], None),
    ],
)
def test_intent_time_is_the_first_intent_in_utc_or_none(history: list[dict[str, Any]], expected: str | None) -> None:
    found = intent_time(history)
    if expected is None:
        assert found is None
    else:
        assert found == dt.datetime.fromisoformat(expected).replace(tzinfo=dt.timezone.utc)
