"""The prediction-style adapter against its local API (real HTTP on 127.0.0.1): failures told apart
honestly, "no job" proven only by an empty listing, the token in no text it raises."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.paid import (
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RemoteState,
    SubmissionLedger,
    wait_for_terminal,
)
from example_adapters.prediction_api import PredictionApi
from example_adapters.prediction_style import PredictionStyleProvider
from tests.paid.canned import CannedServer
from tests.paid.leaks import TOKEN, WRONG, leaks
from tests.paid.support import PAID_CALL_FAULTS
from tests.server_process import server_process

T = "aij-2026-W32-0-0123456789abcdef0123456789abcdef"
REQUEST = {"prompt": "weekly teaser", "units": 2}


@pytest.fixture
def api() -> Iterator[PredictionApi]:
    with PredictionApi(auth_token=TOKEN, polls_to_finish=2, slow_seconds=2.0) as running:
        yield running


def provider_for(api: PredictionApi, *, lookup: bool = True) -> PredictionStyleProvider:
    return PredictionStyleProvider(api.url, TOKEN, lookup=lookup, read_timeout=0.5, backoff_initial=0.01)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_prediction_carries_the_token_in_its_metadata_and_runs_to_its_result(api: PredictionApi) -> None:
    provider = provider_for(api)
    ref = provider.submit(REQUEST, T)
    assert api.jobs_for(T) == [ref]
    assert api.stats()["jobs"][ref]["metadata"] == {"token": T}
    assert api.stats()["jobs"][ref]["input"] == REQUEST
    assert provider.status(ref).state is RemoteState.RUNNING
    done = asyncio.run(provider.astatus(ref))
    assert (done.state, done.cost, done.result) == (
        RemoteState.SUCCEEDED,
        2.5,
        {"url": f"https://media.invalid/{ref}.mp4"},
    )
    assert provider.status(ref) == done, "status is repeatable"
    assert provider.capabilities.lookup and not provider.capabilities.idempotent_tokens


def test_a_failed_prediction_is_failed_with_its_error(api: PredictionApi) -> None:
    provider = provider_for(api)
    ref = provider.submit({**REQUEST, "fail": True}, T)
    provider.status(ref)
    failed = provider.status(ref)
    assert failed.state is RemoteState.FAILED and failed.error == "the model failed on this input"


@pytest.mark.parametrize(("fault", "error", "jobs"), PAID_CALL_FAULTS)
def test_submit_failures_are_classified_and_a_created_job_is_found(
    api: PredictionApi, fault: str, error: type[ProviderError], jobs: int
) -> None:
    api.configure(fault=fault, fault_times=1)
    provider = provider_for(api)
    with pytest.raises(ProviderError) as raised:
        provider.submit(REQUEST, T)
    assert type(raised.value) is error, raised.value
    assert api.accepted(T) == jobs
    assert provider.find(T) == (api.jobs_for(T)[0] if jobs else None)


def test_a_refused_input_is_rejected_and_creates_nothing(api: PredictionApi) -> None:
    with pytest.raises(ProviderRejected, match="HTTP 422"):
        provider_for(api).submit({"prompt": ""}, T)
    assert api.accepted() == 0


def test_an_api_that_does_not_listen_is_unavailable() -> None:
    provider = PredictionStyleProvider(f"http://127.0.0.1:{closed_port()}", TOKEN, backoff_initial=0.01)
    with pytest.raises(ProviderUnavailable, match="not reachable"):
        provider.submit(REQUEST, T)


def test_no_job_is_only_an_empty_complete_listing(api: PredictionApi) -> None:
    provider = provider_for(api)
    assert provider.find(T) is None
    other = provider.submit(REQUEST, "aij-another-token")
    assert provider.find(T) is None, "the API filters: another token's job is not listed"
    api.configure(ignore_filter=True)  # an API that ignores the filter lists every job
    with pytest.raises(ProviderOutcomeUnknown, match="did not filter"):
        provider.find(T)
    mine = provider.submit(REQUEST, T)
    assert provider.find(T) == mine, "a listed job is adopted only by its own metadata"
    assert provider.find("aij-another-token") == other
    provider.submit(REQUEST, T)
    with pytest.raises(ProviderOutcomeUnknown, match="2 jobs carry this token"):
        provider.find(T)


@pytest.mark.parametrize("code", [401, 404, 500, 503])
def test_a_listing_that_fails_proves_nothing(api: PredictionApi, code: int) -> None:
    api.configure(lookup_errors=[code])
    with pytest.raises(ProviderError):
        provider_for(api).find(T)


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (200, "text/html", "<h1>predictions</h1>"),
        (200, "application/json", '{"results": null}'),
        (200, "application/json", '{"results": [], "next": "https://api.invalid/page2"}'),
        (200, "application/json", "[]"),
        (404, "application/json", '{"detail": "not found"}'),
        (302, "text/html", ""),
    ],
)
def test_an_answer_that_is_not_the_listing_proves_nothing(status: int, content_type: str, body: str) -> None:
    headers = {"Location": "http://127.0.0.1:9/"} if status == 302 else None
    with CannedServer(status, content_type, body, headers=headers) as server:
        provider = PredictionStyleProvider(server.url, TOKEN)
        with pytest.raises(ProviderError):
            provider.find(T)


def test_without_the_listing_the_provider_declares_no_lookup(api: PredictionApi) -> None:
    api.configure(lookup=False)
    provider = provider_for(api, lookup=False)
    assert not provider.capabilities.lookup and not provider.capabilities.idempotent_tokens
    with pytest.raises(ProviderError, match="lookup is switched off"):
        provider.find(T)
    assert api.stats()["lookup_calls"] == 0


def test_the_ledger_adopts_the_job_a_lost_answer_made(api: PredictionApi, tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", "lost").episode_id
    ledger, provider = SubmissionLedger(store), provider_for(api)
    api.configure(fault="drop_after_accept", fault_times=1)
    with pytest.raises(ProviderOutcomeUnknown):
        ledger.submit(eid, provider, REQUEST)
    assert store.get(eid).submission.state.value == "unknown"
    episode = ledger.submit(eid, provider, REQUEST)
    token = ledger.token_for(eid)
    assert [episode.submission.remote_ref] == api.jobs_for(token)
    assert api.stats()["submissions"] == 1
    done = wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    assert (done.submission.state.value, done.submission.cost) == ("succeeded", 2.5)


def test_the_token_is_in_no_text_the_adapter_raises(api: PredictionApi) -> None:
    api.configure(echo_token=True, status_errors=[503], fault="4xx", fault_times=1)
    provider = provider_for(api)
    texts = [repr(provider)]
    for call in (lambda: provider.submit(REQUEST, T), lambda: provider.status("p1")):
        with pytest.raises(ProviderError) as raised:
            call()
        texts.append(str(raised.value))
        assert raised.value.__cause__ is None and raised.value.__context__ is None, "no chain back to the request"
    wrong = PredictionStyleProvider(api.url, WRONG)
    with pytest.raises(ProviderRejected, match="HTTP 401") as refused:
        wrong.submit(REQUEST, T)
    texts.append(str(refused.value))
    assert all("<redacted>" in text for text in texts[1:]), texts
    assert not [leaks(text, TOKEN, WRONG) for text in texts if leaks(text, TOKEN, WRONG)], texts
    assert provider.redact(f"Bearer {TOKEN}") == "<redacted>"


@pytest.mark.parametrize(
    ("base_url", "token", "field"),
    [("ftp://127.0.0.1", TOKEN, "base_url"), ("127.0.0.1:80", TOKEN, "base_url"), ("http://h", "", "api_token")],
)
def test_bad_settings_are_invalid_configuration_naming_the_field(base_url: str, token: str, field: str) -> None:
    with pytest.raises(InvalidConfiguration) as bad:
        PredictionStyleProvider(base_url, token)
    assert bad.value.field == field and bad.value.exit_code == 2


def test_the_api_runs_in_its_own_process_and_prints_its_url() -> None:
    with server_process("example_adapters.prediction_api", "--token", "cli-token-1") as running:
        provider = PredictionStyleProvider(running.url, "cli-token-1")
        ref = provider.submit(REQUEST, T)
        assert provider.find(T) == ref
        import httpx

        stats = httpx.get(running.url + "/_admin/stats", headers={"Authorization": "Bearer cli-token-1"}).json()
        assert stats["jobs_per_token"] == {T: 1} and json.dumps(stats)
    assert running.returncode == 0, "SIGTERM ends it cleanly"
