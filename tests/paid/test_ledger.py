"""The ledger against the real provider server: terminal states, lost answers, budgets, bad input."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import (
    BudgetExceeded,
    Episode,
    EpisodeNotFound,
    EpisodeStore,
    InvalidIdentifier,
    StoreCorrupted,
    SubmissionState,
    SubmissionStateUnknown,
)
from airflow_idempotent_jobs.errors import NotReconcilable
from airflow_idempotent_jobs.paid import (
    ProviderOutcomeUnknown,
    ProviderUnavailable,
    SubmissionInProgress,
    SubmissionLedger,
    idempotency_token,
    wait_for_terminal,
)
from airflow_idempotent_jobs.paid.claims import my_claim
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import FileBackend
from tests.paid.support import CAPABILITIES, claim_here, jobs_for, provider_for

REQUEST = {"prompt": "weekly video", "units": 2}


def _poll(ledger: SubmissionLedger, eid: str, provider: HttpPaidProvider) -> None:
    wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01, max_delay=0.1)


def test_token_is_stable_and_scoped() -> None:
    assert idempotency_token("ns1", "2026-W32-0") == idempotency_token("ns1", "2026-W32-0")
    assert idempotency_token("ns1", "2026-W32-0") != idempotency_token("ns2", "2026-W32-0")
    assert idempotency_token("ns1", "2026-W32-0") != idempotency_token("ns1", "2026-W32-1")
    with pytest.raises(InvalidIdentifier):
        idempotency_token("ns1", "2026-W32-01")


def test_retry_after_succeeded_makes_no_call(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    ledger.submit(eid, provider, REQUEST)
    _poll(ledger, eid, provider)
    done = file_store.get(eid)
    assert done.submission.state is SubmissionState.SUCCEEDED
    assert done.submission.cost == 2.5 and done.submission.result["url"].endswith(".mp4")
    before = server.stats()
    again = ledger.submit(eid, provider, REQUEST)
    _poll(ledger, eid, provider)
    after = server.stats()
    assert again.submission == done.submission
    for counter in ("submissions", "accepted", "status_calls", "lookup_calls"):
        assert after[counter] == before[counter], counter


@pytest.mark.parametrize("how", ["validation", "fault"])
def test_4xx_ends_failed_with_the_providers_message(file_store: EpisodeStore, server: ProviderServer, how: str) -> None:
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    request = {"prompt": ""} if how == "validation" else REQUEST
    if how == "fault":
        server.configure(fault="4xx")
    failed = ledger.submit(eid, provider, request)
    assert failed.submission.state is SubmissionState.FAILED
    assert "prompt must not be empty" in (failed.submission.error or "")
    assert "HTTP 422" in (failed.submission.error or "")
    assert server.accepted() == 0 and server.submissions() == 1
    assert ledger.submit(eid, provider, request).submission.state is SubmissionState.FAILED
    assert server.submissions() == 1, "a terminal state is final: no call"


@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_dropped_connection_is_unknown_never_failed(
    file_store: EpisodeStore, server: ProviderServer, capability: str
) -> None:
    server.configure(**CAPABILITIES[capability], fault="drop_after_accept")
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    expected = SubmissionStateUnknown if capability == "c-neither" else ProviderOutcomeUnknown
    with pytest.raises(expected):
        ledger.submit(eid, provider, REQUEST)
    lost = file_store.get(eid).submission
    assert lost.state is SubmissionState.UNKNOWN
    assert lost.remote_ref is None and lost.error
    assert server.accepted(token) == 1
    (job,) = jobs_for(server, token)
    if capability == "c-neither":
        with pytest.raises(SubmissionStateUnknown):
            ledger.submit(eid, provider, REQUEST)
        assert server.submissions() == 1
        assert file_store.get(eid).submission == lost
    else:
        resumed = ledger.submit(eid, provider, REQUEST)
        assert resumed.submission.state is SubmissionState.ACCEPTED
        assert resumed.submission.remote_ref == job
        assert server.accepted(token) == 1


def test_409_on_submit_is_unknown_never_failed(file_store: EpisodeStore, server: ProviderServer) -> None:
    """A conflict on the idempotency key may mean the job exists: never a terminal rejection."""
    server.configure(**CAPABILITIES["b-lookup"], fault="409_after_accept")
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    with pytest.raises(ProviderOutcomeUnknown, match="HTTP 409"):
        ledger.submit(eid, provider, REQUEST)
    assert file_store.get(eid).submission.state is SubmissionState.UNKNOWN
    resumed = ledger.submit(eid, provider, REQUEST)  # looks the token up and adopts the job
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert jobs_for(server, token) == [resumed.submission.remote_ref]
    assert server.submissions(token) == 1 and server.accepted(token) == 1


@pytest.mark.parametrize("fault", ["5xx", "5xx_after_accept"])
def test_5xx_with_tokens_retries_safely(file_store: EpisodeStore, server: ProviderServer, fault: str) -> None:
    server.configure(fault=fault, lookup=False)  # capability (a) alone: the retry resends the token
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    with pytest.raises(ProviderOutcomeUnknown, match="HTTP 50"):
        ledger.submit(eid, provider, REQUEST)
    assert file_store.get(eid).submission.state is SubmissionState.UNKNOWN
    resumed = ledger.submit(eid, provider, REQUEST)
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert resumed.submission.attempts == 2
    assert jobs_for(server, token) == [resumed.submission.remote_ref]
    assert server.submissions(token) == 2 and server.accepted(token) == 1


@pytest.mark.parametrize("fault", ["5xx", "5xx_after_accept"])
def test_with_tokens_and_lookup_the_retry_looks_up_first(
    file_store: EpisodeStore, server: ProviderServer, fault: str
) -> None:
    """An API may forget a token; the lookup does not: a job the lost call made is adopted, not re-sent."""
    server.configure(fault=fault)
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    assert (provider.capabilities.idempotent_tokens, provider.capabilities.lookup) == (True, True)
    with pytest.raises(ProviderOutcomeUnknown, match="HTTP 50"):
        ledger.submit(eid, provider, REQUEST)
    resumed = ledger.submit(eid, provider, REQUEST)
    notes = [entry["note"] for entry in resumed.submission.history]
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert jobs_for(server, token) == [resumed.submission.remote_ref] and server.accepted(token) == 1
    if fault == "5xx_after_accept":  # made: found, never sent again
        assert "found by token lookup" in notes and server.submissions(token) == 1
    else:  # nothing made: the lookup says so, the retry submits once
        assert "token lookup found no job: submitting once with the same token" in notes
        assert server.submissions(token) == 2


def test_with_tokens_a_lookup_that_proves_nothing_resends_the_token(
    file_store: EpisodeStore, server: ProviderServer
) -> None:
    server.configure(fault="5xx_after_accept", lookup_errors=[500])
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    with pytest.raises(ProviderOutcomeUnknown):
        ledger.submit(eid, provider, REQUEST)
    resumed = ledger.submit(eid, provider, REQUEST)
    notes = [entry["note"] for entry in resumed.submission.history]
    assert resumed.submission.state is SubmissionState.ACCEPTED
    assert any(note.startswith("token lookup proved nothing (") for note in notes), notes
    assert server.submissions(token) == 2 and server.accepted(token) == 1  # the token made it harmless


def test_slow_answer_is_unknown(file_store: EpisodeStore, server: ProviderServer) -> None:
    server.configure(fault="slow", slow_seconds=3)
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server, read_timeout=0.3)
    with pytest.raises(ProviderOutcomeUnknown, match="ReadTimeout"):
        ledger.submit(eid, provider, REQUEST)
    assert file_store.get(eid).submission.state is SubmissionState.UNKNOWN


def test_connection_refused_sends_nothing_and_forgets_the_attempt(file_store: EpisodeStore) -> None:
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ProviderServer(port=0) as server:
        config = server.provider_config(base_url=f"http://127.0.0.1:{port}", connect_retries=1)
    provider = HttpPaidProvider(config, auth_header="Authorization", auth_value="Bearer x")
    eid = file_store.allocate("2026-W32", "k").episode_id
    with pytest.raises(ProviderUnavailable, match="not reachable after 2 tries"):
        SubmissionLedger(file_store).submit(eid, provider, REQUEST)
    sub = file_store.get(eid).submission
    assert sub.state is SubmissionState.NONE and "not reachable" in (sub.error or "")


def test_budget_refusal_sends_nothing_and_changes_nothing(tmp_path: Path, server: ProviderServer) -> None:
    backend = FileBackend(tmp_path / "store")
    store = backend.open()
    first = store.allocate("2026-W32", "first").episode_id
    second = store.allocate("2026-W32", "second").episode_id
    other_week = store.allocate("2026-W33", "other").episode_id
    ledger, provider = SubmissionLedger(store, weekly_budget=3.0), provider_for(server)

    snapshot = backend.snapshot()
    with pytest.raises(BudgetExceeded, match="weekly budget 3 for 2026-W32") as refused:
        ledger.submit(first, provider, REQUEST, estimated_cost=4.0)
    assert (refused.value.spent, refused.value.requested) == (0.0, 4.0)
    assert server.submissions() == 0 and backend.snapshot() == snapshot

    ledger.submit(first, provider, REQUEST, estimated_cost=2.0)
    _poll(ledger, first, provider)
    assert store.get(first).submission.cost == 2.5  # the provider's figure replaces the estimate
    sent = server.submissions()
    snapshot = backend.snapshot()
    with pytest.raises(BudgetExceeded) as refused:
        ledger.submit(second, provider, REQUEST, estimated_cost=1.0)
    assert refused.value.spent == 2.5
    assert server.submissions() == sent and backend.snapshot() == snapshot
    assert ledger.submit(second, provider, REQUEST, estimated_cost=0.5).submission.state is SubmissionState.ACCEPTED
    # Another week has its own budget.
    assert ledger.submit(other_week, provider, REQUEST, estimated_cost=3.0).submission.state is SubmissionState.ACCEPTED


def test_unknown_and_malformed_ids_send_nothing(file_store: EpisodeStore, server: ProviderServer) -> None:
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    with pytest.raises(EpisodeNotFound):
        ledger.preflight("2026-W32-7")
    with pytest.raises(EpisodeNotFound):
        ledger.submit("2026-W32-7", provider, REQUEST)
    for bad in ("2026-W32-07", "2026-W54-0", "../etc", ""):
        with pytest.raises(InvalidIdentifier):
            ledger.submit(bad, provider, REQUEST)
    stats = server.stats()
    assert stats["submissions"] == stats["unauthorized"] == stats["lookup_calls"] == 0


@pytest.mark.parametrize("damage", ["not-json", "unknown-version", "bad-state", "accepted-without-ref"])
def test_corrupt_submission_record_fails_closed(tmp_path: Path, server: ProviderServer, damage: str) -> None:
    backend = FileBackend(tmp_path / "store")
    store = backend.open()
    eid = store.allocate("2026-W32", "k").episode_id
    if damage in ("not-json", "unknown-version"):
        backend.corrupt(eid, damage)
    else:
        path = backend.state_path(eid)
        record = json.loads(path.read_text())
        record["submission"]["state"] = "accepted-ish" if damage == "bad-state" else "accepted"
        record["submission"]["token"] = "t"
        path.write_text(json.dumps(record))
    snapshot = backend.snapshot()
    with pytest.raises(StoreCorrupted):
        SubmissionLedger(store).preflight(eid)
    with pytest.raises(StoreCorrupted):
        SubmissionLedger(store).submit(eid, provider_for(server), REQUEST)
    assert server.submissions() == 0 and backend.snapshot() == snapshot


def test_live_claim_elsewhere_blocks_until_its_lease_ends(file_store: EpisodeStore, server: ProviderServer) -> None:
    """A `submitting` intent written on another host is in flight until the lease says otherwise."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    now = dt.datetime.now(dt.timezone.utc)
    token = idempotency_token(file_store.namespace, eid)

    def claimed_elsewhere(episode: Episode) -> Episode:
        sub = episode.submission.moved_to(
            SubmissionState.SUBMITTING,
            episode_id=eid,
            token=token,
            attempts=1,
            claimed_by="other-host.invalid:4242:cafe",
            claimed_at=now.isoformat(),
        )
        return dataclasses.replace(episode, submission=sub)

    file_store.update(eid, claimed_elsewhere)
    provider = provider_for(server)
    with pytest.raises(SubmissionInProgress, match=r"other-host\.invalid"):
        SubmissionLedger(file_store, clock=lambda: now).submit(eid, provider, REQUEST)
    assert server.submissions() == 0
    later = SubmissionLedger(file_store, clock=lambda: now + dt.timedelta(seconds=901))
    assert later.submit(eid, provider, REQUEST).submission.state is SubmissionState.ACCEPTED
    assert server.accepted(token) == 1


def test_claim_of_an_earlier_process_with_our_pid_is_dead(file_store: EpisodeStore, server: ProviderServer) -> None:
    """Pids are reused (a restarted container counts from 1 again): a claim from this host, boot and
    PID namespace with our pid but another process's nonce was written by a process that is gone."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    not_our_nonce = "0badc0de" if ":0badc0de:" not in my_claim() else "deadbeef"

    def claimed_by_our_pid(episode: Episode) -> Episode:
        sub = episode.submission.moved_to(
            SubmissionState.SUBMITTING,
            episode_id=eid,
            token=token,
            attempts=1,
            claimed_by=claim_here(os.getpid(), nonce=not_our_nonce),
            claimed_at=dt.datetime.now(dt.timezone.utc).isoformat(),
        )
        return dataclasses.replace(episode, submission=sub)

    file_store.update(eid, claimed_by_our_pid)
    episode = SubmissionLedger(file_store).submit(eid, provider_for(server), REQUEST)
    assert episode.submission.state is SubmissionState.ACCEPTED  # resubmitted with the same token
    assert server.accepted(token) == 1


def test_another_thread_right_after_our_claim_sees_it_in_flight(file_store: EpisodeStore) -> None:
    """The moment between writing our `submitting` claim and calling the provider: a second thread
    of this process that reads the claim then must see a live submitter, not a dead one."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.namespace, eid)
    seen: list[BaseException | None] = []
    first_thread = threading.get_ident()
    real_update_in_week = file_store.update_in_week

    def update_in_week(*args: Any, **kwargs: Any) -> Episode:
        episode = real_update_in_week(*args, **kwargs)
        mine = threading.get_ident() == first_thread
        if mine and not seen and episode.submission.state is SubmissionState.SUBMITTING:  # our claim is written
            second = threading.Thread(target=lambda: seen.append(_submit_error(file_store, eid, provider)))
            second.start()
            second.join(timeout=30)
        return episode

    with ProviderServer(**CAPABILITIES["b-lookup"]) as server:
        provider = provider_for(server)
        file_store.update_in_week = update_in_week  # type: ignore[method-assign]
        first = SubmissionLedger(file_store).submit(eid, provider, REQUEST)
        assert first.submission.state is SubmissionState.ACCEPTED
        assert len(seen) == 1 and isinstance(seen[0], SubmissionInProgress), seen
        assert server.accepted(token) == 1


def _submit_error(store: EpisodeStore, eid: str, provider: HttpPaidProvider) -> BaseException | None:
    try:
        SubmissionLedger(store).submit(eid, provider, REQUEST)
    except BaseException as exc:
        return exc
    return None


def test_a_late_status_never_reopens_a_terminal_submission(file_store: EpisodeStore, server: ProviderServer) -> None:
    from airflow_idempotent_jobs.paid import RemoteState, RemoteStatus

    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    ledger.submit(eid, provider, REQUEST)
    ledger.record_status(eid, RemoteStatus(RemoteState.RUNNING, cost=1.0))
    assert file_store.get(eid).submission.remote_state == "running"
    ledger.record_status(eid, RemoteStatus(RemoteState.FAILED, cost=1.5, error="provider said no"))
    done = ledger.record_status(eid, RemoteStatus(RemoteState.SUCCEEDED, cost=9.0))
    assert done.submission.state is SubmissionState.FAILED
    assert (done.submission.cost, done.submission.error) == (1.5, "provider said no")


def test_an_unsent_retry_keeps_the_earlier_uncertainty(file_store: EpisodeStore) -> None:
    """Connection refused on a resubmission goes back to `unknown`, never `none`: the first try may exist."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    with ProviderServer(fault="drop_after_accept", lookup=False) as server:
        provider = provider_for(server, connect_retries=0)
        with pytest.raises(ProviderOutcomeUnknown):
            SubmissionLedger(file_store).submit(eid, provider, REQUEST)
    with pytest.raises(ProviderUnavailable):  # the server is gone: nothing can be sent
        SubmissionLedger(file_store).submit(eid, provider, REQUEST)
    sub = file_store.get(eid).submission
    assert (sub.state, sub.attempts) == (SubmissionState.UNKNOWN, 2)
    assert [entry["to"] for entry in sub.history] == ["submitting", "unknown", "submitting", "unknown"]


# -- the one backoff (HTTP connect retries, the blocking poll, the trigger) -------------------------
def test_the_backoff_doubles_up_to_its_ceiling_and_never_spins_at_zero() -> None:
    from itertools import islice

    from airflow_idempotent_jobs.paid.backoff import doubling

    assert list(islice(doubling(0.5, 3.0), 6)) == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert list(islice(doubling(0.0, 1.0), 4)) == [0.0, 0.01, 0.02, 0.04]
    assert list(islice(doubling(0.0, 0.0), 3)) == [0.0, 0.0, 0.0]
    assert list(islice(doubling(-1.0, 5.0), 2)) == [0.0, 0.01]


def test_the_blocking_poll_sleeps_by_the_backoff(file_store: EpisodeStore, server: ProviderServer) -> None:
    server.configure(polls_to_finish=5)
    eid = file_store.allocate("2026-W32", "poll-backoff").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    ledger.submit(eid, provider, {"prompt": "p"})
    slept: list[float] = []
    done = wait_for_terminal(ledger, eid, provider, timeout=60, initial_delay=0.25, max_delay=0.6, sleep=slept.append)
    assert done.submission.state is SubmissionState.SUCCEEDED
    assert slept == [0.25, 0.5, 0.6, 0.6]


def test_a_person_settles_with_via_and_comment_and_a_changed_record_is_refused(
    file_store: EpisodeStore, server: ProviderServer
) -> None:
    """What the operations page sends: who, via, why, and the record as they saw it (append-only)."""
    server.configure(**CAPABILITIES["c-neither"], fault="drop_after_accept")
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    eid = file_store.allocate("2026-W32", "k").episode_id
    with pytest.raises(SubmissionStateUnknown):
        ledger.submit(eid, provider, REQUEST)
    lost = file_store.get(eid)
    with pytest.raises(NotReconcilable, match="changed since it was shown"):
        ledger.reconcile(eid, not_submitted=True, settled_by="carol", expected_updated_at="2026-01-01T00:00:00+00:00")
    assert file_store.get(eid) == lost
    settled = ledger.reconcile(
        eid,
        remote_ref="job-1",
        settled_by="carol",
        via="ui",
        comment="the console shows it",
        expected_updated_at=lost.updated_at,
    )
    sub = settled.submission
    assert (sub.state, sub.remote_ref, sub.settled_by) == (SubmissionState.ACCEPTED, "job-1", "carol")
    assert sub.history[: len(lost.submission.history)] == lost.submission.history
    last = sub.history[-1]
    assert (last["by"], last["via"], last["comment"], last["to"]) == ("carol", "ui", "the console shows it", "accepted")
    assert file_store.get(eid) == settled
