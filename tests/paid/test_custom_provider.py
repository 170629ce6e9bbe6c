"""A custom provider (no `HttpProviderConfig`, its own client code) under the ledger, the budget and reconcile.

`JobClientProvider` is what an adapter author writes for an API the HTTP provider's JSON layout
does not describe: here a client of the project's provider server written on ``http.client``,
with its own failure classification. The Airflow tests build it through a `PaidProviderHook`
(``tests/airflow/test_custom_provider_hook.py``); these tests use it directly, against the real
server, to show that nothing in the ledger depends on the HTTP provider.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState, SubmissionStateUnknown
from airflow_idempotent_jobs.errors import BudgetExceeded
from airflow_idempotent_jobs.paid import (
    ProviderCapabilities,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RemoteState,
    RemoteStatus,
    SubmissionLedger,
    idempotency_token,
    wait_for_terminal,
)
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import jobs_for, run_cli

_STATES: Final = {
    "queued": RemoteState.PENDING,
    "rendering": RemoteState.RUNNING,
    "completed": RemoteState.SUCCEEDED,
    "error": RemoteState.FAILED,
}
_REDACTED: Final = "<redacted>"


class JobClientProvider:
    """A `PaidProvider` for the provider server's wire format, on ``http.client`` (no httpx, no config).

    Classification: a connection that could not be opened is `ProviderUnavailable` (nothing
    sent); once the request is written, any failure to read an answer is `ProviderOutcomeUnknown`;
    429 is unavailable, 408/409/5xx unknown, any other 4xx a rejection. ``tokens``: the API
    returns the existing job for a known ``Idempotency-Key``; ``lookup``: ``GET /jobs?token=``.
    """

    def __init__(self, base_url: str, token: str, *, tokens: bool, lookup: bool, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"base_url must be http://host[:port], not {base_url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self._token = token
        self.timeout = timeout
        self.capabilities = ProviderCapabilities(idempotent_tokens=tokens, lookup=lookup)

    def __repr__(self) -> str:
        return f"JobClientProvider({self.host}:{self.port}, tokens={self.capabilities.idempotent_tokens})"

    def redact(self, text: str) -> str:
        return text.replace(self._token, _REDACTED) if self._token else text

    # -- the port ------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        code, body = self._call("POST", "/jobs", dict(request), {"Idempotency-Key": idempotency_token})
        self._raise_for(code, body, "submit")
        ref = _dig(body, "job", "id")
        if not isinstance(ref, str) or not ref:
            raise ProviderOutcomeUnknown(f"submit answered HTTP {code} without a job id: the job may exist")
        return ref

    def status(self, remote_ref: str) -> RemoteStatus:
        code, body = self._call("GET", f"/jobs/{quote(remote_ref, safe='')}")
        self._raise_for(code, body, "status")
        word = _dig(body, "job", "status")
        if word not in _STATES:
            raise ProviderOutcomeUnknown(f"status answered an unknown state {word!r:.40}")
        error = _dig(body, "error", "message")
        return RemoteStatus(
            state=_STATES[word],
            cost=_dig(body, "billing", "amount"),
            result=body.get("output") if isinstance(body, dict) else None,
            error=None if error is None else self.redact(str(error)),
        )

    def find(self, idempotency_token: str) -> str | None:
        code, body = self._call("GET", f"/jobs?token={quote(idempotency_token, safe='')}")
        if code == 404 and _dig(body, "error", "code") == "no_job":
            return None  # the API's positive "no job carries this token"
        self._raise_for(code, body, "lookup")
        ref = _dig(body, "job", "id")
        if not isinstance(ref, str) or not ref:
            raise ProviderOutcomeUnknown(f"lookup answered HTTP {code} without a job id or a 'no job' answer")
        return ref

    # -- transport -----------------------------------------------------------------------------
    def _call(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            try:
                conn.connect()
            except OSError as exc:  # refused, unreachable, connect timeout: nothing was sent
                raise ProviderUnavailable(f"{method} {path}: cannot connect: {type(exc).__name__}") from None
            data = None if body is None else json.dumps(body).encode()
            all_headers = {"Authorization": f"Bearer {self._token}", **(headers or {})}
            if data is not None:
                all_headers["Content-Type"] = "application/json"
            try:
                conn.request(method, path, body=data, headers=all_headers)
                response = conn.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException) as exc:  # sent, or maybe: the answer is lost
                raise ProviderOutcomeUnknown(f"{method} {path}: {type(exc).__name__} after sending") from None
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, None

    def _raise_for(self, code: int, body: Any, what: str) -> None:
        if 200 <= code < 300:
            return
        message = self.redact(f"{what} answered HTTP {code}: {_dig(body, 'error', 'message')}")
        if code == 429:
            raise ProviderUnavailable(message, status=code)
        if 400 <= code < 500 and code not in (408, 409):
            raise ProviderRejected(message, status=code)
        raise ProviderOutcomeUnknown(message, status=code)


def _dig(data: Any, *path: str) -> Any:
    for step in path:
        data = data.get(step) if isinstance(data, dict) else None
    return data


# -- the ledger with a custom provider ------------------------------------------------------------
def client(server: ProviderServer, *, tokens: bool = False, lookup: bool = True) -> JobClientProvider:
    return JobClientProvider(server.url, server.auth_token, tokens=tokens, lookup=lookup)


def test_a_lost_answer_is_looked_up_and_paid_once(file_store: EpisodeStore, server: ProviderServer) -> None:
    eid = file_store.allocate("2026-W32", "custom-lost").episode_id
    token = idempotency_token(file_store.identity, eid)
    server.configure(honour_tokens=False, lookup=True, fault="drop_after_accept", fault_times=1)
    ledger, provider = SubmissionLedger(file_store), client(server)
    with pytest.raises(ProviderOutcomeUnknown):
        ledger.submit(eid, provider, {"prompt": "p"})
    assert file_store.get(eid).submission.state is SubmissionState.UNKNOWN
    (job,) = jobs_for(server, token)  # the provider made the job; its answer was lost
    retried = ledger.submit(eid, provider, {"prompt": "p"})
    assert (retried.submission.state, retried.submission.remote_ref) == (SubmissionState.ACCEPTED, job)
    done = wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01)
    assert (done.submission.state, done.submission.cost) == (SubmissionState.SUCCEEDED, 1.25)
    assert server.accepted(token) == 1 and server.submissions(token) == 1


def test_the_weekly_budget_holds_for_a_custom_provider(file_store: EpisodeStore, server: ProviderServer) -> None:
    first = file_store.allocate("2026-W32", "custom-budget-0").episode_id
    second = file_store.allocate("2026-W32", "custom-budget-1").episode_id
    ledger, provider = SubmissionLedger(file_store, weekly_budget=3.0), client(server)
    ledger.submit(first, provider, {"prompt": "a", "units": 2}, estimated_cost=2.0)
    assert wait_for_terminal(ledger, first, provider, timeout=10, initial_delay=0.01).submission.cost == 2.5
    with pytest.raises(BudgetExceeded):
        ledger.submit(second, provider, {"prompt": "b"}, estimated_cost=1.0)  # 2.5 spent + 1.0 > 3.0
    assert file_store.get(second).submission.state is SubmissionState.NONE
    assert server.submissions() == 1


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPOTENT_JOBS")}
    return {**env, **extra}


@pytest.mark.parametrize(
    ("fault", "word"), [("drop_after_accept", "--remote-ref"), ("5xx", "--not-submitted")], ids=["made", "not-made"]
)
def test_reconcile_settles_a_custom_providers_unknown_submission(
    tmp_path: Path, file_store: EpisodeStore, server: ProviderServer, fault: str, word: str
) -> None:
    """Capability (c): no tokens, no lookup. The operator checks the provider and settles by their word:
    the job it made (``--remote-ref``), or none (``--not-submitted``: a 503 before anything was created)."""
    eid = file_store.allocate("2026-W32", f"custom-reconcile-{fault}").episode_id
    token = idempotency_token(file_store.identity, eid)
    server.configure(honour_tokens=False, lookup=False, fault=fault, fault_times=1)
    ledger, provider = SubmissionLedger(file_store), client(server, lookup=False)
    with pytest.raises(SubmissionStateUnknown):
        ledger.submit(eid, provider, {"prompt": "p"})
    made = jobs_for(server, token)
    assert len(made) == (1 if word == "--remote-ref" else 0)
    args = [word, made[0]] if made else [word]
    done = run_cli("--store", str(tmp_path / "store"), "reconcile", eid, *args, env=_cli_env(USER="ops"))
    assert done.returncode == 0, done.stderr
    assert file_store.get(eid).submission.settled_by == f"ops@{socket.gethostname()}"
    settled = ledger.submit(eid, provider, {"prompt": "p"})  # resumes the job, or sends once
    assert settled.submission.state is SubmissionState.ACCEPTED
    assert wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01).submission.cost == 1.25
    assert server.accepted(token) == 1
