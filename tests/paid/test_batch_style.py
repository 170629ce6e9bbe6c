"""The batch-style adapter against its local API (real HTTP on 127.0.0.1): two calls per job, classified
for the paid one; the upload may repeat, the batch never (the crash matrix kills a process between them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.paid import (
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RemoteState,
    SubmissionLedger,
    wait_for_terminal,
)
from example_adapters.batch_api import BatchApi
from example_adapters.batch_style import BatchStyleProvider
from tests.paid.leaks import TOKEN, WRONG, leaks
from tests.paid.support import PAID_CALL_FAULTS
from tests.server_process import server_process

T = "aij-2026-W32-0-0123456789abcdef0123456789abcdef"
REQUEST = {"prompt": "weekly teaser", "units": 2}
#: Faults of the upload: none sends the paid batch, so only a refusal is not "unavailable".
UPLOAD_FAULTS = [
    ("4xx", ProviderRejected),
    ("429", ProviderUnavailable),
    ("5xx", ProviderUnavailable),
    ("5xx_after_accept", ProviderUnavailable),
    ("409_after_accept", ProviderUnavailable),
    ("drop_after_accept", ProviderUnavailable),
    ("slow", ProviderUnavailable),
]


@pytest.fixture
def api() -> Iterator[BatchApi]:
    with BatchApi(auth_token=TOKEN, polls_to_finish=2, slow_seconds=2.0) as running:
        yield running


def provider_for(api: BatchApi, *, lookup: bool = True) -> BatchStyleProvider:
    return BatchStyleProvider(api.url, TOKEN, lookup=lookup, read_timeout=0.5, backoff_initial=0.01)


def test_a_job_is_one_upload_then_one_batch_carrying_the_token(api: BatchApi) -> None:
    provider = provider_for(api)
    ref = provider.submit(REQUEST, T)
    stats = api.stats()
    assert api.jobs_for(T) == [ref] and stats["jobs"][ref]["metadata"] == {"token": T}
    (upload,) = stats["files"].values()
    assert upload["filename"] == f"{T}.json" and stats["jobs"][ref]["input_file_id"] == upload["id"]
    assert provider.status(ref).state is RemoteState.RUNNING
    done = provider.status(ref)
    assert (done.state, done.cost, done.result) == (
        RemoteState.SUCCEEDED,
        2.5,
        {"url": f"https://media.invalid/{ref}.mp4"},
    )
    assert provider.status(ref) == done, "status is repeatable"
    assert provider.find(T) == ref
    assert not provider.capabilities.idempotent_tokens and provider.capabilities.lookup


def test_a_failed_batch_is_failed_with_its_errors(api: BatchApi) -> None:
    provider = provider_for(api)
    ref = provider.submit({**REQUEST, "fail": True}, T)
    provider.status(ref)
    failed = provider.status(ref)
    assert failed.state is RemoteState.FAILED and failed.error == "the model failed on this input"


@pytest.mark.parametrize(("fault", "error"), UPLOAD_FAULTS)
def test_an_upload_that_fails_never_sends_the_batch(api: BatchApi, fault: str, error: type[ProviderError]) -> None:
    api.configure(upload_fault=fault, upload_fault_times=1)
    provider = provider_for(api)
    with pytest.raises(ProviderError) as raised:
        provider.submit(REQUEST, T)
    assert type(raised.value) is error, raised.value
    assert api.stats()["submissions"] == 0 and api.accepted() == 0, "the paid call was never made"
    assert provider.find(T) is None
    assert provider.submit(REQUEST, T) == api.jobs_for(T)[0], "the retry uploads again and pays once"


@pytest.mark.parametrize(("fault", "error", "batches"), PAID_CALL_FAULTS)  # the batch call
def test_batch_call_failures_are_classified_and_a_created_batch_is_found(
    api: BatchApi, fault: str, error: type[ProviderError], batches: int
) -> None:
    api.configure(fault=fault, fault_times=1)
    provider = provider_for(api)
    with pytest.raises(ProviderError) as raised:
        provider.submit(REQUEST, T)
    assert type(raised.value) is error, raised.value
    assert api.accepted(T) == batches
    assert provider.find(T) == (api.jobs_for(T)[0] if batches else None)


def test_a_batch_over_an_unknown_file_is_rejected(api: BatchApi) -> None:
    with pytest.raises(ProviderRejected, match="HTTP 404"):
        provider_for(api).create_batch("file-that-was-never-uploaded", T)
    assert api.accepted() == 0


def test_no_batch_is_only_an_empty_complete_listing(api: BatchApi) -> None:
    provider = provider_for(api)
    assert provider.find(T) is None
    provider.submit(REQUEST, "aij-another-token")
    assert provider.find(T) is None
    api.configure(ignore_filter=True)
    with pytest.raises(ProviderOutcomeUnknown, match="did not filter"):
        provider.find(T)
    api.configure(ignore_filter=False, lookup=False)
    with pytest.raises(ProviderError, match="HTTP 501"):
        provider.find(T)
    with pytest.raises(ProviderError, match="lookup is switched off"):
        provider_for(api, lookup=False).find(T)


@pytest.mark.parametrize(("upload_fault", "fault"), [("drop_after_accept", None), (None, "drop_after_accept")])
def test_the_ledger_pays_once_whichever_call_lost_its_answer(
    api: BatchApi, tmp_path: Path, upload_fault: str | None, fault: str | None
) -> None:
    """A lost upload: nothing was sent, the ledger forgets the attempt. A lost batch answer: unknown, adopted."""
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", "lost").episode_id
    ledger, provider = SubmissionLedger(store), provider_for(api)
    api.configure(upload_fault=upload_fault, fault=fault)
    with pytest.raises(ProviderUnavailable if upload_fault else ProviderOutcomeUnknown):
        ledger.submit(eid, provider, REQUEST)
    assert store.get(eid).submission.state.value == ("none" if upload_fault else "unknown")
    episode = ledger.submit(eid, provider, REQUEST)
    token = ledger.token_for(eid)
    assert [episode.submission.remote_ref] == api.jobs_for(token)
    assert api.stats()["submissions"] == 1, "one paid batch call in all"
    assert api.uploads_named(f"{token}.json") == (2 if upload_fault else 1)
    done = wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    assert (done.submission.state.value, done.submission.cost) == ("succeeded", 2.5)


def test_the_token_is_in_no_text_the_adapter_raises(api: BatchApi) -> None:
    api.configure(echo_token=True, status_errors=[503], upload_fault="5xx", fault="4xx")
    provider = provider_for(api)
    texts = [repr(provider)]
    for call in (
        lambda: provider.submit(REQUEST, T),  # the upload's 503
        lambda: provider.submit(REQUEST, T),  # the batch call's 422
        lambda: provider.status("batch_1"),
        lambda: BatchStyleProvider(api.url, WRONG).submit(REQUEST, T),
    ):
        with pytest.raises(ProviderError) as raised:
            call()
        texts.append(str(raised.value))
        shown_chain = raised.value.__cause__ or (
            None if raised.value.__suppress_context__ else raised.value.__context__
        )
        assert shown_chain is None, "no traceback chain back to the request"
    assert all("<redacted>" in text for text in texts[1:]), texts
    assert not [leaks(text, TOKEN, WRONG) for text in texts if leaks(text, TOKEN, WRONG)], texts


def test_the_api_runs_in_its_own_process_and_prints_its_url() -> None:
    with server_process("example_adapters.batch_api", "--token", "cli-token-2", "--no-lookup") as running:
        provider = BatchStyleProvider(running.url, "cli-token-2")
        provider.submit(REQUEST, T)
        with pytest.raises(ProviderError, match="HTTP 501"):
            provider.find(T)
    assert running.returncode == 0, "SIGTERM ends it cleanly"
