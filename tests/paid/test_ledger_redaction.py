"""Defence in depth: the ledger passes every provider error text through the provider's ``redact``.

`HttpPaidProvider` redacts at the source; a provider that does not (any `PaidProvider` may be
plugged in) must still never get its credential into the record, the raised error or its chain.
`LeakyProvider` is the real HTTP provider against the real provider server, with its credential
appended to every error text, as a careless client would, and a public ``redact``.
"""

from __future__ import annotations

import dataclasses
import socket
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState, SubmissionStateUnknown
from airflow_idempotent_jobs.paid import (
    PollTimeout,
    ProviderCapabilities,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderUnavailable,
    RemoteState,
    RemoteStatus,
    SubmissionLedger,
    wait_for_terminal,
)
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import FileBackend
from tests.paid.support import CAPABILITIES, provider_for

SECRET = "sk-live-0123456789abcdef"


class LeakyProvider:
    """A real provider whose error texts carry its credential; ``redact`` knows how to remove it."""

    def __init__(self, inner: HttpPaidProvider) -> None:
        self.inner = inner

    @property
    def capabilities(self) -> ProviderCapabilities:
        return self.inner.capabilities

    def redact(self, text: str) -> str:
        return text.replace(SECRET, "<redacted>")

    def _leak(self, exc: ProviderError) -> ProviderError:
        return type(exc)(f"{exc} [sent with Authorization: Bearer {SECRET}]", status=exc.status)

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        try:
            return self.inner.submit(request, idempotency_token)
        except ProviderError as exc:
            raise self._leak(exc) from None

    def status(self, remote_ref: str) -> RemoteStatus:
        try:
            status = self.inner.status(remote_ref)
        except ProviderError as exc:
            raise self._leak(exc) from None
        if status.error is None:
            return status
        return dataclasses.replace(status, error=f"{status.error} (account key {SECRET})")

    def find(self, idempotency_token: str) -> str | None:
        try:
            return self.inner.find(idempotency_token)
        except ProviderError as exc:
            raise self._leak(exc) from None


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def leaky_server() -> Iterator[ProviderServer]:
    with ProviderServer(polls_to_finish=1) as running:
        yield running


def _clean(exc: BaseException | None, record: Path) -> None:
    """Neither the error as Airflow would log it (with its chain) nor the record hold the secret."""
    if exc is not None:
        text = "".join(traceback.format_exception(exc))
        assert SECRET not in text, text
        assert "<redacted>" in str(exc)
    assert SECRET not in record.read_text()


def _state(store_dir: Path, eid: str) -> Path:
    return FileBackend(store_dir).state_path(eid)


def test_a_rejection_is_stored_redacted(
    file_store: EpisodeStore, leaky_server: ProviderServer, store_dir: Path
) -> None:
    leaky_server.configure(fault="4xx")
    eid = file_store.allocate("2026-W32", "k").episode_id
    failed = SubmissionLedger(file_store).submit(eid, LeakyProvider(provider_for(leaky_server)), {"prompt": "p"})
    assert failed.submission.state is SubmissionState.FAILED
    assert failed.submission.error is not None and "<redacted>" in failed.submission.error
    _clean(None, _state(store_dir, eid))
    assert "HTTP 422" in failed.submission.error


@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_a_lost_answer_is_raised_and_stored_redacted(
    file_store: EpisodeStore, store_dir: Path, capability: str
) -> None:
    eid = file_store.allocate("2026-W32", "k").episode_id
    with ProviderServer(polls_to_finish=1, fault="5xx_after_accept", **CAPABILITIES[capability]) as server:
        provider = LeakyProvider(provider_for(server))
        expected = SubmissionStateUnknown if capability == "c-neither" else ProviderOutcomeUnknown
        with pytest.raises(expected) as caught:
            SubmissionLedger(file_store).submit(eid, provider, {"prompt": "p"})
    _clean(caught.value, _state(store_dir, eid))
    assert file_store.get(eid).submission.state is SubmissionState.UNKNOWN


def test_an_unreachable_provider_is_raised_and_stored_redacted(file_store: EpisodeStore, store_dir: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with ProviderServer() as server:
        provider = LeakyProvider(provider_for(server, base_url=nowhere, connect_retries=0))
    eid = file_store.allocate("2026-W32", "k").episode_id
    with pytest.raises(ProviderUnavailable) as caught:
        SubmissionLedger(file_store).submit(eid, provider, {"prompt": "p"})
    _clean(caught.value, _state(store_dir, eid))
    sub = file_store.get(eid).submission
    assert sub.state is SubmissionState.NONE and "not reachable" in (sub.error or "")


def test_a_failed_job_and_a_stuck_poll_are_redacted(
    file_store: EpisodeStore, leaky_server: ProviderServer, store_dir: Path
) -> None:
    eid = file_store.allocate("2026-W32", "failing").episode_id
    ledger, provider = SubmissionLedger(file_store), LeakyProvider(provider_for(leaky_server))
    ledger.submit(eid, provider, {"prompt": "p", "fail": True})
    done = wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    assert done.submission.state is SubmissionState.FAILED
    assert done.submission.error == "generation failed on the provider side (account key <redacted>)"
    _clean(None, _state(store_dir, eid))
    # A poll that keeps failing: PollTimeout carries the last error, redacted.
    stuck = file_store.allocate("2026-W32", "stuck").episode_id
    ledger.submit(stuck, provider, {"prompt": "p"})
    leaky_server.configure(status_errors=[503] * 50)
    with pytest.raises(PollTimeout) as caught:
        wait_for_terminal(ledger, stuck, provider, timeout=0.3, initial_delay=0.01, max_delay=0.05)
    _clean(caught.value, _state(store_dir, stuck))


def test_record_status_redacts_with_the_callers_redact(file_store: EpisodeStore, leaky_server: ProviderServer) -> None:
    """What execute_complete does with a trigger's event: the error goes through ``redact`` before it is stored."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), LeakyProvider(provider_for(leaky_server))
    ledger.submit(eid, provider, {"prompt": "p"})
    status = RemoteStatus(RemoteState.FAILED, error=f"quota of {SECRET} exhausted")
    done = ledger.record_status(eid, status, redact=provider.redact)
    assert done.submission.error == "quota of <redacted> exhausted"


def test_a_refused_status_call_is_raised_redacted(file_store: EpisodeStore, leaky_server: ProviderServer) -> None:
    """A 401 on a status call is not a lost answer: wait_for_terminal raises it, redacted."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), LeakyProvider(provider_for(leaky_server))
    ledger.submit(eid, provider, {"prompt": "p"})
    leaky_server.configure(status_errors=[401])
    with pytest.raises(ProviderError, match="HTTP 401") as caught:
        wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    assert SECRET not in "".join(traceback.format_exception(caught.value))
    assert "<redacted>" in str(caught.value)


def test_a_failed_lookup_is_raised_redacted(file_store: EpisodeStore, store_dir: Path) -> None:
    """Capability (b) after a lost answer: the lookup itself fails (the API stopped offering it)."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    with ProviderServer(polls_to_finish=1, fault="drop_after_accept", **CAPABILITIES["b-lookup"]) as server:
        ledger, provider = SubmissionLedger(file_store), LeakyProvider(provider_for(server))
        with pytest.raises(ProviderOutcomeUnknown):
            ledger.submit(eid, provider, {"prompt": "p"})
        server.configure(lookup=False)  # GET /jobs?token= now answers 501
        for attempt in (
            lambda: ledger.submit(eid, provider, {"prompt": "p"}),
            lambda: ledger.reconcile(eid, provider=provider, settled_by="oncall"),
        ):
            with pytest.raises(ProviderError) as caught:
                attempt()
            _clean(caught.value, _state(store_dir, eid))
