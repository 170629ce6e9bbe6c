"""The provider token never leaves `HttpPaidProvider` or ``reconcile``, in any form, even when the
server echoes it in every error answer (``401 {"error": "token X is not valid"}``), URL-encoded,
base64, JSON-escaped or as the whole header. Against the real provider server (``echo_token``) and
a real HTML error page; the CLI as a real process.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import logging
import math
import os
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState, SubmissionStateUnknown
from airflow_idempotent_jobs.paid import ProviderError, RemoteState, SubmissionLedger
from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.canned import CannedServer
from tests.paid.leaks import TOKEN, WRONG, leaks, token_forms
from tests.paid.support import run_cli


@pytest.fixture
def echo() -> Iterator[ProviderServer]:
    with ProviderServer(auth_token=TOKEN, echo_token=True, polls_to_finish=1) as running:
        yield running


def provider(server: ProviderServer, token: str = TOKEN, **overrides: Any) -> HttpPaidProvider:
    config = server.provider_config(connect_retries=0, **overrides)
    return HttpPaidProvider(config, auth_header="Authorization", auth_value=f"Bearer {token}")


def texts_of(exc: BaseException) -> list[str]:
    """What a log, a store or a UI could show of an exception: its text, repr and whole traceback."""
    return [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


def failure(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(ProviderError) as caught:
        call()
    return caught.value


def test_no_form_of_the_token_leaves_the_provider_in_any_error_status(
    echo: ProviderServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore included
    good, wrong = provider(echo), provider(echo, WRONG)
    ref = good.submit({"prompt": "p"}, "tok-0")
    seen: list[str] = []
    statuses: set[int | None] = set()

    def collect(exc: BaseException) -> None:
        seen.extend(texts_of(exc))
        statuses.add(getattr(exc, "status", None))

    for call in (  # 401: the server echoes the wrong token it was sent
        lambda: wrong.submit({"prompt": "p"}, "tok-1"),
        lambda: wrong.status(ref),
        lambda: asyncio.run(wrong.astatus(ref)),
        lambda: wrong.find("tok-0"),
    ):
        collect(failure(call))
    for fault in ("4xx", "5xx", "5xx_after_accept", "409_after_accept"):  # 422, 503, 500, 409
        echo.configure(fault=fault, fault_times=1)
        collect(failure(lambda: good.submit({"prompt": "p"}, "tok-2")))
    collect(failure(lambda: good.status("job-that-does-not-exist")))  # 404
    echo.configure(status_errors=[401, 403, 409, 429, 500, 503])
    for _ in range(3):
        collect(failure(lambda: good.status(ref)))
        collect(failure(lambda: asyncio.run(good.astatus(ref))))
    echo.configure(lookup_errors=[401, 404, 409, 429, 500, 503])
    for _ in range(6):
        collect(failure(lambda: good.find("tok-0")))
    echo.configure(lookup=False)  # 501
    collect(failure(lambda: good.find("tok-0")))
    failed_ref = good.submit({"prompt": "p", "fail": True}, "tok-3")
    done = good.status(failed_ref)
    assert done.state is RemoteState.FAILED and done.error and "generation failed" in done.error
    seen.append(done.error)
    seen += [record.getMessage() for record in caplog.records]
    seen += [str(record.exc_info) for record in caplog.records if record.exc_info]
    assert {401, 403, 404, 409, 422, 429, 500, 501, 503} <= statuses, statuses
    found = [(text[:200], leaks(text)) for text in seen if leaks(text)]
    assert not found, found[:3]
    # The positive control: the server did echo the token, in every form the test looks for.
    echo.configure(lookup=True)
    import httpx

    raw = httpx.get(f"{echo.url}/jobs/none", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    echoed = {name.split(":")[1] for name in leaks(raw["error"]["message"], TOKEN)}
    assert {"bare", "url", "b64", "json", "header", "core0"} <= echoed


def test_an_html_error_page_that_echoes_the_token_is_redacted_before_it_is_shortened() -> None:
    """The body is cut at 300 characters: redacting after the cut would leave half a token."""
    forms = token_forms(TOKEN)
    for offset in range(280, 300, 3):
        page = "x" * offset + f"<p>bad token {html.escape(TOKEN)} or {forms['url']} or {forms['b64']}</p>"
        with CannedServer(500, "text/html", page) as canned:
            p = HttpPaidProvider(_plain_config(canned.url), auth_header="Authorization", auth_value=f"Bearer {TOKEN}")
            exc = failure(functools.partial(p.status, "job-1"))
        assert "answered HTTP 500" in str(exc)
        partial = [TOKEN[:n] for n in range(6, len(TOKEN))]
        assert not leaks(str(exc)) and not any(part in str(exc) for part in partial), str(exc)[-200:]


def test_an_echo_in_a_field_we_quote_short_stays_out_of_the_traceback_too() -> None:
    """A state word we cannot map is quoted cut to 80 characters; nothing of the token may survive the cut."""
    body = json.dumps({"state": "x" * 90 + TOKEN, "result": {"note": TOKEN}})
    with CannedServer(200, "application/json", body) as canned:
        p = HttpPaidProvider(_plain_config(canned.url), auth_header="Authorization", auth_value=f"Bearer {TOKEN}")
        exc = failure(functools.partial(p.status, "job-1"))
    assert "map it in state_map" in str(exc)
    assert not leaks("\n".join(texts_of(exc))), texts_of(exc)[-1]


def test_an_echo_in_a_cost_that_is_no_number_reaches_nothing() -> None:
    """Such a cost is NaN for the ledger to record as an anomaly: the text itself is kept nowhere."""
    body = json.dumps({"state": "running", "cost": "x" * 90 + TOKEN, "result": {"note": TOKEN}})
    with CannedServer(200, "application/json", body) as canned:
        p = HttpPaidProvider(_plain_config(canned.url), auth_header="Authorization", auth_value=f"Bearer {TOKEN}")
        status = p.status("job-1")
    assert status.cost is not None and math.isnan(status.cost)
    assert not leaks(repr(status)), repr(status)


def _plain_config(url: str) -> Any:
    from airflow_idempotent_jobs.paid.http import HttpProviderConfig

    return HttpProviderConfig(base_url=url, connect_retries=0)


def test_redact_replaces_every_form_and_keeps_the_rest() -> None:
    p = HttpPaidProvider(_plain_config("http://127.0.0.1:9"), auth_header="Authorization", auth_value=f"Bearer {TOKEN}")
    for name, form in token_forms(TOKEN).items():
        text = f"before {form} after"
        assert p.redact(text) == "before <redacted> after", name
        assert p.redact(text.upper()) == "BEFORE <redacted> AFTER", name  # a server may shout
    assert p.redact("nothing secret here: Provider Credential") == "nothing secret here: Provider Credential"
    assert HttpPaidProvider(_plain_config("http://127.0.0.1:9")).redact("same text") == "same text"
    tiny = HttpPaidProvider(_plain_config("http://127.0.0.1:9"), auth_header="Authorization", auth_value="Bearer x")
    assert tiny.redact("not reachable: x; sent Bearer x") == "not reachable: x; sent <redacted>"
    basic = HttpPaidProvider(
        _plain_config("http://127.0.0.1:9"), auth_header="Authorization", auth_value="Basic dXNlcjpwYTU1d29yZA=="
    )
    assert basic.redact("user:pa55word and pa55word") == "<redacted> and <redacted>"


def test_the_ledger_stores_no_form_of_the_token(tmp_path: Path, echo: ProviderServer) -> None:
    store_path = tmp_path / "store"
    from airflow_idempotent_jobs import open_store

    with open_store(store_path) as store:
        rejected = store.allocate("2026-W32", "rejected").episode_id
        unknown = store.allocate("2026-W32", "unknown").episode_id
        failed = store.allocate("2026-W32", "failed").episode_id
        ledger = SubmissionLedger(store)
        assert (
            ledger.submit(rejected, provider(echo, WRONG), {"prompt": "p"}).submission.state is SubmissionState.FAILED
        )
        echo.configure(fault="5xx", fault_times=1)
        with pytest.raises(ProviderError) as caught:
            ledger.submit(unknown, provider(echo), {"prompt": "p"})
        assert not leaks("\n".join(texts_of(caught.value)))
        assert store.get(unknown).submission.state is SubmissionState.UNKNOWN
        ledger.submit(failed, provider(echo), {"prompt": "p", "fail": True})
        assert (
            ledger.record_status(failed, provider(echo).status(_ref(store, failed))).submission.state.value == "failed"
        )
        shown = [e.to_dict() for e in store.list()]
    assert all(e["submission"]["error"] for e in shown), shown
    stored = "\n".join(path.read_text(errors="replace") for path in store_path.rglob("*") if path.is_file())
    assert "generation failed" in stored and "HTTP 401" in stored
    assert not leaks(stored), leaks(stored)


def _ref(store: EpisodeStore, eid: str) -> str:
    ref = store.get(eid).submission.remote_ref
    assert ref is not None
    return ref


@pytest.mark.parametrize("code", [401, 409, 500, 503])
def test_reconcile_never_prints_the_token(code: int, tmp_path: Path, echo: ProviderServer) -> None:
    from airflow_idempotent_jobs import open_store

    with open_store(tmp_path / "store") as store:
        eid = store.allocate("2026-W32", "k").episode_id
        echo.configure(honour_tokens=False, fault="drop_after_accept", fault_times=1)
        with pytest.raises(SubmissionStateUnknown):
            SubmissionLedger(store).submit(
                eid, provider(echo, tokens_honoured=False, lookup_path=None), {"prompt": "p"}
            )
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPOTENT_JOBS")}
    env["IDEMPOTENT_JOBS_PROVIDER_TOKEN"] = WRONG if code == 401 else TOKEN
    if code != 401:
        echo.configure(lookup_errors=[code])
    done = run_cli(
        "--store", str(tmp_path / "store"), "reconcile", eid, "--provider-url", echo.url, "--ref-path", "job.id",
        env=env,
    )  # fmt: skip
    assert done.returncode != 0 and f"HTTP {code}" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not leaks(done.stdout + done.stderr), (leaks(done.stdout + done.stderr), done.stderr)
