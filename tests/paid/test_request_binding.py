"""One episode pays for one request: the ledger binds the submission to the request's fingerprint.

Against the real provider server; the legacy case runs on both stores (the PostgreSQL store
compares the submission record whole in its conditional UPDATE).
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState
from airflow_idempotent_jobs.paid import (
    InvalidRequest,
    ProviderOutcomeUnknown,
    ProviderUnavailable,
    RequestConflict,
    SubmissionLedger,
    idempotency_token,
    request_fingerprint,
    wait_for_terminal,
)
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend, FileBackend
from tests.paid.support import CAPABILITIES, jobs_for, provider_for

COVER = {"prompt": "cover art", "units": 2}
TRAILER = {"prompt": "trailer", "units": 2}


def test_fingerprint_is_sha256_of_canonical_json() -> None:
    request = {"b": 1, "a": [1.5, "é", None, True], "c": {"y": 2, "x": "z"}}
    canonical = '{"a":[1.5,"é",null,true],"b":1,"c":{"x":"z","y":2}}'.encode()
    assert request_fingerprint(request) == "sha256:" + hashlib.sha256(canonical).hexdigest()
    # Key order never matters; a tuple is the list JSON sends.
    assert request_fingerprint({"c": {"x": "z", "y": 2}, "a": (1.5, "é", None, True), "b": 1}) == (
        request_fingerprint(request)
    )
    # Numbers are compared as the JSON text the provider receives: 1 and 1.0 differ.
    assert request_fingerprint({"units": 1}) != request_fingerprint({"units": 1.0})
    assert request_fingerprint({"x": 0.1 + 0.2}) != request_fingerprint({"x": 0.3})


@pytest.mark.parametrize(
    "bad",
    [
        {"units": float("nan")},
        {"units": float("inf")},
        {1: "int key"},
        {"nested": {2: "int key"}},
        {"when": object()},
        {"tags": {"a", "b"}},
        {"text": "\ud800"},  # a lone surrogate: not UTF-8
    ],
    ids=["nan", "inf", "int-key", "nested-int-key", "object", "set", "surrogate"],
)
def test_a_request_without_canonical_json_is_refused_before_anything(
    file_store: EpisodeStore, server: ProviderServer, bad: dict[Any, Any]
) -> None:
    with pytest.raises(InvalidRequest):
        request_fingerprint(bad)
    eid = file_store.allocate("2026-W32", "k").episode_id
    before = file_store.get(eid)
    with pytest.raises(InvalidRequest):
        SubmissionLedger(file_store).submit(eid, provider_for(server), bad)
    assert file_store.get(eid) == before and server.submissions() == 0


def test_deep_and_cyclic_requests_are_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for bad in (deep, cyclic):
        with pytest.raises(InvalidRequest):
            request_fingerprint(bad)


def test_the_intent_records_the_request_fingerprint(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = file_store.allocate("2026-W32", "k").episode_id
    episode = SubmissionLedger(file_store).submit(eid, provider_for(server), COVER)
    assert episode.submission.request_fingerprint == request_fingerprint(COVER)
    assert file_store.get(eid).submission.request_fingerprint == request_fingerprint(COVER)


def _conflict_names_both(exc: RequestConflict, eid: str) -> None:
    message = str(exc)
    assert eid in message
    assert request_fingerprint(COVER) in message and request_fingerprint(TRAILER) in message
    assert (exc.recorded, exc.requested) == (request_fingerprint(COVER), request_fingerprint(TRAILER))
    assert exc.exit_code == 3 and not exc.retryable


def test_another_request_on_the_same_episode_fails_closed_in_every_state(
    file_store: EpisodeStore, server: ProviderServer
) -> None:
    """Two map indexes on one episode ("cover art", "trailer"): the second never gets the first's job."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.identity, eid)
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    accepted = ledger.submit(eid, provider, COVER)
    assert accepted.submission.state is SubmissionState.ACCEPTED

    def refused() -> None:
        before = file_store.get(eid)
        with pytest.raises(RequestConflict) as caught:
            ledger.submit(eid, provider, TRAILER)
        _conflict_names_both(caught.value, eid)
        with pytest.raises(RequestConflict):
            ledger.preflight(eid, TRAILER)
        assert file_store.get(eid) == before, "a refused request changes nothing"

    refused()  # accepted
    wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    assert file_store.get(eid).submission.state is SubmissionState.SUCCEEDED
    refused()  # succeeded (terminal)
    assert server.submissions(token) == 1 and jobs_for(server, token) == [accepted.submission.remote_ref]
    # The same request resumes as before: the stored result, no call.
    calls = server.stats()["status_calls"]
    again = ledger.submit(eid, provider, {"units": 2, "prompt": "cover art"})  # key order does not matter
    assert again.submission.state is SubmissionState.SUCCEEDED
    assert ledger.preflight(eid, COVER).submission == again.submission
    assert server.submissions(token) == 1 and server.stats()["status_calls"] == calls


@pytest.mark.parametrize("capability", ["a-tokens", "b-lookup"])
def test_a_retry_that_rendered_another_request_is_never_sent(file_store: EpisodeStore, capability: str) -> None:
    """The answer was lost (`unknown`): resubmitting (a) or adopting by lookup (b) must be the same request."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    token = idempotency_token(file_store.identity, eid)
    with ProviderServer(polls_to_finish=1, fault="drop_after_accept", **CAPABILITIES[capability]) as server:
        ledger, provider = SubmissionLedger(file_store), provider_for(server)
        with pytest.raises(ProviderOutcomeUnknown):
            ledger.submit(eid, provider, COVER)
        lost = file_store.get(eid)
        assert lost.submission.state is SubmissionState.UNKNOWN
        with pytest.raises(RequestConflict) as caught:
            ledger.submit(eid, provider, TRAILER)
        _conflict_names_both(caught.value, eid)
        assert server.submissions(token) == 1 and server.stats()["lookup_calls"] == 0
        assert file_store.get(eid) == lost
        resumed = ledger.submit(eid, provider, COVER)
        assert resumed.submission.state is SubmissionState.ACCEPTED
        assert jobs_for(server, token) == [resumed.submission.remote_ref]


def test_a_request_never_sent_may_be_replaced(file_store: EpisodeStore, server: ProviderServer) -> None:
    """Connection refused on the first try sends nothing (back to `none`): the next request is free to go."""
    eid = file_store.allocate("2026-W32", "k").episode_id
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"
    ledger = SubmissionLedger(file_store)
    with pytest.raises(ProviderUnavailable):
        ledger.submit(eid, provider_for(server, base_url=nowhere, connect_retries=0), COVER)
    assert file_store.get(eid).submission.state is SubmissionState.NONE
    episode = ledger.submit(eid, provider_for(server), TRAILER)
    assert episode.submission.request_fingerprint == request_fingerprint(TRAILER)
    assert server.submissions() == 1


# -- records written before fingerprints ---------------------------------------------------------
def _rewrite_submission(backend: Backend, eid: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the stored submission record directly, as an older version of the package wrote it."""
    if isinstance(backend, FileBackend):
        path = backend.state_path(eid)
        record = json.loads(path.read_text())
        change(record["submission"])
        path.write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return
    import psycopg
    from psycopg.types.json import Jsonb

    with psycopg.connect(backend.url, autocommit=True) as conn:
        (submission,) = conn.execute(
            "SELECT submission FROM idempotent_jobs.episodes WHERE episode_id = %s", (eid,)
        ).fetchone() or (None,)
        assert isinstance(submission, dict)
        change(submission)
        conn.execute(
            "UPDATE idempotent_jobs.episodes SET submission = %s WHERE episode_id = %s", (Jsonb(submission), eid)
        )


def test_a_submission_recorded_before_fingerprints_resumes_unbound(backend: Backend, server: ProviderServer) -> None:
    """An older record has no ``request_fingerprint``: any request resumes it as before, and it stays unbound.

    On PostgreSQL this also proves the record round-trips byte for byte: the conditional UPDATE
    compares the stored submission whole, and a new key would make every later write fail.
    """
    store = backend.open()
    eid = store.allocate("2026-W32", "legacy").episode_id
    token = idempotency_token(store.identity, eid)
    ledger, provider = SubmissionLedger(store), provider_for(server)
    ledger.submit(eid, provider, COVER)
    _rewrite_submission(backend, eid, lambda sub: sub.pop("request_fingerprint"))
    old = store.get(eid).submission
    assert old.request_fingerprint is None and "request_fingerprint" not in old.to_dict()

    resumed = ledger.submit(eid, provider, TRAILER)  # cannot be compared: resumes as it always did
    assert resumed.submission == old
    assert ledger.preflight(eid, TRAILER).submission == old
    done = wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)  # writes through the store
    assert done.submission.state is SubmissionState.SUCCEEDED
    assert done.submission.request_fingerprint is None
    assert server.submissions(token) == 1
    store.close()
