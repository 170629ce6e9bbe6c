"""Results are bounded before they are kept: a 5 MB answer must not become a 5 MB record.

Against a real HTTP job API (`RawProvider`) whose result is raw JSON text; the stores are real
(the PostgreSQL one too: its jsonb refuses ``\\u0000``, which JSON itself allows).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState, SubmissionStateUnknown, safe_json
from airflow_idempotent_jobs.paid import (
    NotReconcilable,
    ProviderCapabilities,
    RemoteState,
    RemoteStatus,
    SubmissionLedger,
    idempotency_token,
    wait_for_terminal,
)
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.paid.results import DEFAULT_RESULT_LIMIT, bound_result
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend, FileBackend
from tests.paid.raw_provider import RawProvider
from tests.paid.support import CAPABILITIES, provider_for

REQUEST = {"prompt": "weekly video"}


@pytest.fixture
def api() -> Iterator[RawProvider]:
    with RawProvider() as running:
        yield running


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def nested(depth: int) -> Any:
    """A list nested ``depth`` levels deep (``depth`` 1 is ``[]``)."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _pay(store: EpisodeStore, api: RawProvider, **options: Any) -> str:
    eid = store.allocate("2026-W32", "k").episode_id
    ledger = SubmissionLedger(store, **options)
    ledger.submit(eid, api.provider(), REQUEST)
    wait_for_terminal(ledger, eid, api.provider(), timeout=10, initial_delay=0.01)
    return eid


def test_a_5mb_result_is_left_out_with_its_size_and_sha256(
    file_store: EpisodeStore, api: RawProvider, tmp_path: Path
) -> None:
    result = {"frames": ["x" * 1000] * 5000, "url": "https://media.invalid/big.mp4"}
    api.result = json.dumps(result)
    eid = _pay(file_store, api)
    sub = file_store.get(eid).submission
    assert sub.state is SubmissionState.SUCCEEDED and sub.remote_ref == "job-0"
    assert sub.result is None and sub.result_omitted is not None
    assert sub.result_omitted.size == len(canonical(result)) > 5_000_000
    assert sub.result_omitted.sha256 == hashlib.sha256(canonical(result)).hexdigest()
    assert sub.result_omitted.limit == DEFAULT_RESULT_LIMIT == 64 * 1024
    assert "over the limit of 65536" in sub.result_omitted.reason
    state = FileBackend(tmp_path / "store").state_path(eid)
    assert state.stat().st_size < 8 * 1024


def test_a_small_result_is_kept_as_is(file_store: EpisodeStore, api: RawProvider) -> None:
    api.result = '{"url": "https://media.invalid/x.mp4", "sizes": [1, 2.5, null], "ok": true}'
    sub = file_store.get(_pay(file_store, api)).submission
    assert sub.result == {"url": "https://media.invalid/x.mp4", "sizes": [1, 2.5, None], "ok": True}
    assert sub.result_omitted is None


def test_the_bound_is_configurable(file_store: EpisodeStore, api: RawProvider) -> None:
    api.result = '{"url": "https://media.invalid/x.mp4"}'
    sub = file_store.get(_pay(file_store, api, result_limit=16)).submission
    assert sub.result is None and sub.result_omitted is not None
    size = len(b'{"url":"https://media.invalid/x.mp4"}')
    assert (sub.result_omitted.size, sub.result_omitted.limit) == (size, 16)


def test_a_result_nested_too_deep_for_the_record_is_left_out(
    file_store: EpisodeStore, api: RawProvider, tmp_path: Path
) -> None:
    """63 levels pass the HTTP answer's own depth check (64 with the answer's object), but the record
    nests the result two levels down: written as is, no strict reader could read the record back."""
    api.result = json.dumps(nested(63))
    eid = _pay(file_store, api)
    sub = file_store.get(eid).submission
    assert sub.result is None and sub.result_omitted is not None
    assert "nested deeper than" in sub.result_omitted.reason
    assert sub.result_omitted.sha256 == hashlib.sha256(canonical(nested(63))).hexdigest()
    safe_json.loads(FileBackend(tmp_path / "store").state_path(eid).read_bytes())  # the strict reader reads it


def test_a_result_as_deep_as_a_record_can_hold_is_kept(file_store: EpisodeStore, api: RawProvider) -> None:
    api.result = json.dumps(nested(62))
    assert file_store.get(_pay(file_store, api)).submission.result == nested(62)


@pytest.mark.parametrize(
    "result",
    [{"n": 10**50}, {"x": float("nan")}, {"x": float("inf")}, {"when": {1, 2}}, {"text": "\ud800"}],
    ids=["huge-int", "nan", "inf", "set", "surrogate"],
)
def test_a_result_no_strict_reader_accepts_is_left_out(file_store: EpisodeStore, result: Any) -> None:
    """What a Python provider (not HTTP) may hand back: never written into a record we cannot read."""
    bounded = bound_result(result)
    assert bounded.value is None and bounded.omitted is not None
    assert "not storable" in bounded.omitted.reason


def test_a_nul_character_is_left_out_on_every_store(backend: Backend, api: RawProvider) -> None:
    """JSON allows ``\\u0000``; PostgreSQL's jsonb refuses it: the write of the outcome would fail."""
    api.result = '{"caption": "a\\u0000b"}'
    api.state, api.error = "error", "bad byte \u0000 here"
    store = backend.open()
    try:
        eid = _pay(store, api)
        sub = store.get(eid).submission
        assert sub.state is SubmissionState.FAILED
        assert sub.error is not None and "\x00" not in sub.error and "bad byte" in sub.error
        store.close()
        store = backend.open()
        eid2 = store.allocate("2026-W32", "ok").episode_id
        ledger = SubmissionLedger(store)
        ledger.submit(eid2, api.provider(), REQUEST)
        done = ledger.record_status(eid2, RemoteStatus(RemoteState.SUCCEEDED, result={"caption": "a\x00b"}))
        assert done.submission.result is None and done.submission.result_omitted is not None
        assert "NUL" in done.submission.result_omitted.reason
        assert store.get(eid2).submission == done.submission
    finally:
        store.close()


def test_a_long_error_text_is_bounded(file_store: EpisodeStore, api: RawProvider) -> None:
    api.state, api.error = "error", "e" * 100_000
    sub = file_store.get(_pay(file_store, api)).submission
    assert sub.state is SubmissionState.FAILED
    assert sub.error is not None and len(sub.error) < 2100 and "(100000 characters)" in sub.error


class OddIdProvider:
    """A provider (the real HTTP one underneath) whose job ids are ``job_id``: what a plugged-in
    provider that does not check its answers may hand the ledger."""

    def __init__(self, inner: HttpPaidProvider, job_id: str) -> None:
        self.inner, self.job_id = inner, job_id

    @property
    def capabilities(self) -> ProviderCapabilities:
        return self.inner.capabilities

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        self.inner.submit(request, idempotency_token)
        return self.job_id

    def status(self, remote_ref: str) -> RemoteStatus:
        return self.inner.status(remote_ref)

    def find(self, idempotency_token: str) -> str | None:
        return self.job_id if self.inner.find(idempotency_token) else None


@pytest.mark.parametrize("job_id", ["job\u0000x", "j" * 5000, "job\nInjected: line"], ids=["nul", "long", "newline"])
def test_a_job_reference_no_record_can_hold_fails_closed(backend: Backend, job_id: str) -> None:
    """The provider accepted, but its id cannot be kept (jsonb refuses NUL; a 5000-character id is no id):
    the submission is `unknown` and the task stops for reconcile, never a store traceback or a loop."""
    store = backend.open()
    try:
        eid = store.allocate("2026-W32", "k").episode_id
        token = idempotency_token(store.identity, eid)
        with ProviderServer(polls_to_finish=1, **CAPABILITIES["b-lookup"]) as server:
            provider = OddIdProvider(provider_for(server), job_id)
            ledger = SubmissionLedger(store)
            with pytest.raises(SubmissionStateUnknown, match="cannot be kept") as caught:
                ledger.submit(eid, provider, REQUEST)
            assert "idempotent-jobs reconcile" in str(caught.value) and len(str(caught.value)) < 2500
            sub = store.get(eid).submission
            assert sub.state is SubmissionState.UNKNOWN and sub.remote_ref is None
            assert sub.error is not None and "cannot be kept" in sub.error and "\x00" not in sub.error
            # The retry looks the token up (capability b), finds the same unusable id: refused, unchanged.
            with pytest.raises(SubmissionStateUnknown, match="token lookup answered"):
                ledger.submit(eid, provider, REQUEST)
            assert store.get(eid).submission == sub
            with pytest.raises(NotReconcilable, match="cannot be kept"):
                ledger.reconcile(eid, provider=provider, settled_by="oncall")
            assert server.accepted(token) == 1 and server.submissions(token) == 1
    finally:
        store.close()
