"""Two weeks of episodes in every state, made through the real ledger against the local provider server.

Shared by the read model's tests and the ``report`` command's. Where only time can make a state
(a ``submitting`` claim left by a worker on another host, hours ago), the record is moved by a
store update that follows the ledger's own transition (`Submission.moved_to`), as that worker did.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.episode import Episode, EpisodeStatus, SubmissionState
from airflow_idempotent_jobs.errors import SubmissionStateUnknown
from airflow_idempotent_jobs.paid import (
    RemoteState,
    RemoteStatus,
    SubmissionLedger,
    wait_for_terminal,
)
from airflow_idempotent_jobs.task_key import default_allocation_key
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import provider_for

WEEK, LAST_WEEK = "2026-W32", "2026-W31"
RUN = "scheduled__2026-08-03T10:00:00+00:00"
REQUEST = {"prompt": "weekly video"}
#: The local server's price for one job.
PRICE = 1.25


@dataclass(frozen=True)
class Scenario:
    """Episode ids by what they show."""

    allocated: str  # unmapped default key, run id with ':' and '+00:00'
    succeeded: str  # mapped key (map index 3), cost PRICE
    failed: str  # rejected by the provider (4xx), a bounded ``airflow#`` key
    unknown: str  # the answer was lost, provider can neither honour tokens nor look up; error echoed the credential
    stale: str  # submitting, claimed by another host two hours ago
    fresh: str  # submitting, claimed by another host a minute ago
    rejected: str  # a person said no
    approved_running: str  # approved, then accepted and not finished
    asked: str  # a question waits for its answer
    anomaly: str  # succeeded with a NaN cost and no estimate: spend unknowable
    migrated: str  # a migrated key: no owner
    last_week_paid: str  # 2026-W31, succeeded with cost PRICE
    last_week_unknown: str  # 2026-W31, unknown


def _claimed_elsewhere(store: EpisodeStore, eid: str, ledger: SubmissionLedger, at: dt.datetime) -> None:
    def change(ep: Episode) -> Episode:
        sub = ep.submission.moved_to(
            SubmissionState.SUBMITTING,
            episode_id=eid,
            note="intent written before calling the provider",
            token=ledger.token_for(eid),
            attempts=1,
            claimed_by="worker-7.example:4242:abcd1234",
            claimed_at=at.isoformat(),
        )
        return dataclasses.replace(ep, submission=sub, status=EpisodeStatus.RUNNING, updated_at=sub.updated_at)

    store.update(eid, change)


def build(store: EpisodeStore, server: ProviderServer, now: dt.datetime) -> Scenario:
    ledger = SubmissionLedger(store)

    def key(task: str, map_index: int | None = None, run: str = RUN) -> str:
        return default_allocation_key("weekly_media", task, run, map_index)

    def alloc(k: str, week: str = WEEK) -> str:
        return store.allocate(week, k).episode_id

    def pay(eid: str, *, finish: bool = True) -> None:
        ledger.submit(eid, provider_for(server), REQUEST)
        if finish:
            wait_for_terminal(ledger, eid, provider_for(server), timeout=10, initial_delay=0.01)

    allocated = alloc(key("generate"))
    succeeded = alloc(key("generate", 3))
    pay(succeeded)
    failed = alloc(key("generate", run="manual__" + "x" * 600))
    server.configure(fault="4xx", fault_times=1)
    pay(failed, finish=False)
    unknown = alloc(key("generate", 4))
    server.configure(honour_tokens=False, lookup=False, fault="5xx_after_accept", fault_times=1, echo_token=True)
    with pytest.raises(SubmissionStateUnknown):
        pay(unknown)
    server.configure(honour_tokens=True, lookup=True, echo_token=False)
    stale = alloc(key("generate", 5))
    _claimed_elsewhere(store, stale, ledger, now - dt.timedelta(hours=2))
    fresh = alloc(key("generate", 6))
    _claimed_elsewhere(store, fresh, ledger, now - dt.timedelta(minutes=1))
    rejected = alloc(key("approve", 7))
    store.decide(rejected, "rejected", by="alice", via="cli", comment="too dear")
    approved_running = alloc(key("generate", 8))
    store.decide(approved_running, "approved", by="bob", via="airflow")
    pay(approved_running, finish=False)
    asked = alloc(key("generate", 9))
    store.ask(asked, by="weekly_media.approve", via="airflow")
    anomaly = alloc(key("generate", 10))
    pay(anomaly, finish=False)
    ledger.record_status(anomaly, RemoteStatus(state=RemoteState.SUCCEEDED, cost=float("nan")))
    migrated = alloc("migrated:2026-W32")
    last_week_paid = alloc(key("generate", run="scheduled__2026-07-27T10:00:00+00:00"), LAST_WEEK)
    pay(last_week_paid)
    last_week_unknown = alloc(key("generate", 1, run="scheduled__2026-07-27T10:00:00+00:00"), LAST_WEEK)
    server.configure(honour_tokens=False, lookup=False, fault="drop_after_accept", fault_times=1)
    with pytest.raises(SubmissionStateUnknown):
        pay(last_week_unknown)
    server.configure(honour_tokens=True, lookup=True)
    return Scenario(
        allocated,
        succeeded,
        failed,
        unknown,
        stale,
        fresh,
        rejected,
        approved_running,
        asked,
        anomaly,
        migrated,
        last_week_paid,
        last_week_unknown,
    )
