"""A lookup proves "no job for this token" only with the answer its config declares.

Against real servers that are not the provider's lookup endpoint (``python -m http.server`` on an
empty directory, an HTML 500 page, a 200 without the fields, a non-empty list without ids, a
redirect to another host that would give the declared answer, a 404 of another shape), the
provider says "unknown", ``reconcile`` exits non-zero with one line and changes nothing, and the
ledger's retry (capability (b)) sends no submission.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState, SubmissionStateUnknown
from airflow_idempotent_jobs.paid import ProviderOutcomeUnknown, SubmissionLedger, idempotency_token
from airflow_idempotent_jobs.paid.http import HttpPaidProvider, HttpProviderConfig
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.canned import CannedServer, static_file_server
from tests.paid.support import jobs_for, provider_for, run_cli

#: The declared "no job" answers: the provider server's two lookup styles.
NOT_FOUND = {"lookup_no_job_status": 404, "lookup_no_job_path": "error.code", "lookup_no_job_value": "no_job"}
EMPTY_LIST = {"lookup_no_job_status": 200, "lookup_no_job_path": "jobs", "lookup_no_job_value": None}
WRONG = [
    "static-404-html",
    "html-500",
    "200-json-without-fields",
    "200-list-without-ids",
    "redirect-to-another-host",
    "404-json-of-another-shape",
]
REQUEST = {"prompt": "p"}


@contextmanager
def wrong_server(case: str, tmp_path: Path) -> Iterator[tuple[str, CannedServer | None, dict[str, Any]]]:
    """(URL, the canned server or None, the declared answer a real lookup endpoint would give)."""
    with ExitStack() as stack:
        shape: dict[str, Any] = {"lookup_ref_path": "job.id", **NOT_FOUND}
        canned: CannedServer | None = None
        if case == "static-404-html":
            url = stack.enter_context(static_file_server(tmp_path / "empty-site"))
        elif case == "html-500":
            page = "<html><head><title>500</title></head>\n<body><h1>Internal Server Error</h1></body></html>"
            canned = CannedServer(500, "text/html", page)
        elif case == "200-json-without-fields":
            canned = CannedServer(200, "application/json", '{"ok": true, "items": 3}')
        elif case == "200-list-without-ids":
            canned = CannedServer(200, "application/json", '{"jobs": [{"name": "weekly video"}]}')
            shape = {"lookup_ref_path": "jobs.0.id", **EMPTY_LIST}
        elif case == "redirect-to-another-host":
            # The other host answers exactly the declared "no job": following the redirect would believe it.
            other = stack.enter_context(
                CannedServer(404, "application/json", '{"error": {"code": "no_job"}}', host="127.0.0.2")
            )
            canned = CannedServer(302, "text/html", "", headers={"Location": f"{other.url}/jobs?token=x"})
        else:
            canned = CannedServer(404, "application/json", '{"error": {"message": "no route /jobs"}}')
        if canned is not None:
            url = stack.enter_context(canned).url
        yield url, canned, shape


def lookup_provider(url: str, **fields: Any) -> HttpPaidProvider:
    config = HttpProviderConfig(
        base_url=url,
        lookup_path="/jobs?token={token}",
        tokens_honoured=False,
        ref_path="job.id",
        connect_retries=0,
        read_timeout=10,
        **fields,
    )
    return HttpPaidProvider(config, auth_header="Authorization", auth_value="Bearer lookup-test-token")


def lost(store: EpisodeStore, server: ProviderServer) -> str:
    """An episode left `unknown` (a 503 on submit, under capability (c))."""
    eid = store.allocate("2026-W32", "lookup").episode_id
    server.configure(honour_tokens=False, fault="5xx", fault_times=1)
    with pytest.raises(SubmissionStateUnknown):
        SubmissionLedger(store).submit(eid, provider_for(server, tokens_honoured=False, lookup_path=None), REQUEST)
    assert store.get(eid).submission.state is SubmissionState.UNKNOWN
    return eid


def cli_shape(shape: dict[str, Any]) -> list[str]:
    args = ["--ref-path", shape["lookup_ref_path"], "--no-job-status", str(shape["lookup_no_job_status"])]
    args += ["--no-job-path", shape["lookup_no_job_path"]]
    if shape["lookup_no_job_value"] is not None:
        args += ["--no-job-value", shape["lookup_no_job_value"]]
    return args


def env(token: str = "lookup-test-token") -> dict[str, str]:
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPOTENT_JOBS")}
    return {**clean, "IDEMPOTENT_JOBS_PROVIDER_TOKEN": token}


@pytest.mark.parametrize("case", WRONG)
def test_find_on_a_server_that_is_not_the_lookup_endpoint_is_unknown(case: str, tmp_path: Path) -> None:
    with wrong_server(case, tmp_path) as (url, canned, shape):
        for fields in (shape, {}):  # with the declared answer, and with none declared
            with pytest.raises(ProviderOutcomeUnknown) as caught:
                lookup_provider(url, **fields).find("aij-2026-W32-0-abc")
            message = str(caught.value)
            assert "unknown" in message and "\n" not in message, message
        if canned is not None:
            assert canned.posts == 0


@pytest.mark.parametrize("declared", [False, True], ids=["no-shape-given", "shape-given"])
@pytest.mark.parametrize("case", WRONG)
def test_reconcile_against_it_exits_non_zero_and_changes_nothing(
    case: str, declared: bool, tmp_path: Path, file_store: EpisodeStore, server: ProviderServer
) -> None:
    eid = lost(file_store, server)
    before = file_store.get(eid)
    with wrong_server(case, tmp_path) as (url, _canned, shape):
        extra = cli_shape(shape) if declared else ["--ref-path", shape["lookup_ref_path"]]
        done = run_cli("--store", str(tmp_path / "store"), "reconcile", eid, "--provider-url", url, *extra, env=env())
    assert done.returncode != 0, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "unknown" in done.stderr and done.stdout == ""
    assert file_store.get(eid) == before


@pytest.mark.parametrize("case", WRONG)
def test_the_ledgers_retry_looks_up_there_and_submits_nothing(
    case: str, tmp_path: Path, file_store: EpisodeStore, server: ProviderServer
) -> None:
    """Capability (b) with a misconfigured lookup: the retry must not read "no job" and pay again."""
    eid = lost(file_store, server)
    before = file_store.get(eid)
    with wrong_server(case, tmp_path) as (url, canned, shape):
        provider = lookup_provider(url, **shape)
        assert provider.capabilities.lookup and not provider.capabilities.idempotent_tokens
        with pytest.raises(ProviderOutcomeUnknown):
            SubmissionLedger(file_store).submit(eid, provider, REQUEST)
        if canned is not None:
            assert canned.posts == 0, "a submission was sent after a lookup that proved nothing"
    assert file_store.get(eid) == before


def test_a_misconfigured_lookup_path_on_the_real_provider_is_unknown(
    file_store: EpisodeStore, server: ProviderServer
) -> None:
    """The provider's own 404 for an unknown route is not its "no job" answer."""
    eid = lost(file_store, server)
    before = file_store.get(eid)
    for path in ("/job?token={token}", "/_admin/stats?token={token}", "/jobs/{token}"):
        provider = provider_for(server, tokens_honoured=False, lookup_path=path)
        with pytest.raises(ProviderOutcomeUnknown, match="unknown"):
            SubmissionLedger(file_store).submit(eid, provider, REQUEST)
    assert file_store.get(eid) == before
    assert server.submissions() == 1  # the lost one only


@pytest.mark.parametrize("style", ["not_found", "list"])
def test_the_declared_answer_proves_no_job_and_a_job_is_found(style: str, server: ProviderServer) -> None:
    server.configure(lookup_style=style)
    provider = provider_for(server)
    config = provider.config
    assert config.lookup_no_job_status == (404 if style == "not_found" else 200)
    assert provider.find("never-used") is None
    ref = provider.submit({"prompt": "p"}, "tok/with?odd&chars")
    assert provider.find("tok/with?odd&chars") == ref


def test_without_a_declared_answer_no_job_is_never_proven(file_store: EpisodeStore, server: ProviderServer) -> None:
    """The safe default: the real "no job" 404, undeclared, still reads as unknown, and nothing is sent."""
    bare = {"lookup_no_job_status": None, "lookup_no_job_path": None, "lookup_no_job_value": None}
    provider = provider_for(server, **bare)
    with pytest.raises(ProviderOutcomeUnknown, match="none is declared"):
        provider.find("never-used")
    eid = lost(file_store, server)
    before = file_store.get(eid)
    with pytest.raises(ProviderOutcomeUnknown):
        SubmissionLedger(file_store).submit(eid, provider_for(server, tokens_honoured=False, **bare), REQUEST)
    assert file_store.get(eid) == before and server.submissions() == 1


@pytest.mark.parametrize("style", ["not_found", "list"])
def test_reconcile_with_the_declared_answer_settles_no_job(
    style: str, tmp_path: Path, file_store: EpisodeStore, server: ProviderServer
) -> None:
    eid = lost(file_store, server)
    server.configure(lookup_style=style)
    shape = (
        {"lookup_ref_path": "job.id", **NOT_FOUND}
        if style == "not_found"
        else {"lookup_ref_path": "jobs.0.id", **EMPTY_LIST}
    )
    done = run_cli(
        "--store", str(tmp_path / "store"), "reconcile", eid, "--provider-url", server.url, *cli_shape(shape),
        env=env(server.auth_token),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sub = file_store.get(eid).submission
    assert (sub.state, sub.settled_how) == (SubmissionState.NONE, "token lookup: no job for the token")
    assert jobs_for(server, idempotency_token(file_store.namespace, eid)) == []
