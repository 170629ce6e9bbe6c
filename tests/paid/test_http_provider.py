"""`HttpPaidProvider` against the real provider server: auth, JSON paths, classification, secrecy."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.paid import (
    PaidProvider,
    PollTimeout,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    RemoteState,
    SubmissionLedger,
    wait_for_terminal,
)
from airflow_idempotent_jobs.paid.http import HttpPaidProvider, HttpProviderConfig, _dig
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.paid.support import PROCESS_TIMEOUT, provider_for

SECRET = "s3cr3t-Provider-Credential-9f2c"


@pytest.fixture
def secret_server() -> Iterator[ProviderServer]:
    with ProviderServer(auth_token=SECRET, polls_to_finish=2) as running:
        yield running


def _provider(server: ProviderServer, **overrides: object) -> HttpPaidProvider:
    return HttpPaidProvider(
        server.provider_config(**overrides), auth_header="Authorization", auth_value=f"Bearer {SECRET}"
    )


def test_the_auth_header_is_sent_and_required(secret_server: ProviderServer) -> None:
    provider = _provider(secret_server)
    assert isinstance(provider, PaidProvider)
    ref = provider.submit({"prompt": "p"}, "tok-1")
    assert provider.status(ref).state is RemoteState.RUNNING
    assert secret_server.stats()["unauthorized"] == 0
    wrong = HttpPaidProvider(secret_server.provider_config(), auth_header="Authorization", auth_value="Bearer nope")
    with pytest.raises(ProviderRejected) as rejected:
        wrong.submit({"prompt": "p"}, "tok-2")
    assert rejected.value.status == 401 and "missing or wrong credentials" in str(rejected.value)
    assert secret_server.stats()["unauthorized"] == 1 and secret_server.accepted() == 1


def test_the_credential_never_shows(
    secret_server: ProviderServer, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore included
    provider = _provider(secret_server, read_timeout=0.3, connect_retries=1)
    seen: list[str] = [repr(provider), str(provider.__dict__.get("config"))]
    ref = provider.submit({"prompt": "p"}, "tok")
    provider.status(ref)
    asyncio.run(provider.astatus(ref))
    failures: list[BaseException] = []
    for fault in ("drop_after_accept", "slow", "5xx", "4xx"):
        secret_server.configure(fault=fault, fault_times=1, slow_seconds=2)
        with pytest.raises(ProviderError) as caught:
            provider.submit({"prompt": "p"}, "tok")
        failures.append(caught.value)
    with pytest.raises(ProviderRejected) as missing:
        provider.status("job-that-does-not-exist")
    failures.append(missing.value)
    refused = HttpPaidProvider(
        secret_server.provider_config(base_url="http://127.0.0.1:9", connect_retries=0),
        auth_header="Authorization",
        auth_value=f"Bearer {SECRET}",
    )
    with pytest.raises(ProviderError) as unreachable:
        refused.submit({"prompt": "p"}, "tok")
    failures.append(unreachable.value)
    for exc in failures:
        seen += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    # The ledger records provider errors in the store: they must be clean too.
    seen += [record.getMessage() for record in caplog.records]
    assert len(caplog.records) > 5, "logging was captured"
    leaked = [text for text in seen if SECRET in text]
    assert not leaked, leaked[:1]


def test_json_paths_and_state_mapping(secret_server: ProviderServer) -> None:
    provider = _provider(secret_server)
    ref = provider.submit({"prompt": "p", "units": 4}, "tok")
    assert ref.startswith("job-")
    first = provider.status(ref)  # "rendering", mapped through state_map
    assert (first.state, first.cost, first.result) == (RemoteState.RUNNING, None, None)
    done = provider.status(ref)
    assert done.state is RemoteState.SUCCEEDED and done.cost == 5.0
    assert done.result == {"url": f"https://media.invalid/{ref}.mp4"}
    unmapped = _provider(secret_server, state_map={}, state_path="job.id")
    with pytest.raises(ProviderError, match="map it in state_map"):
        unmapped.status(ref)
    assert _dig({"a": {"b": [{"c": 1}]}}, "a.b.0.c") == 1
    assert _dig({"a": {"b": []}}, "a.b.0.c") is None
    assert _dig({"a": 1}, "a.x") is None


def test_failed_remote_job_reports_its_error(secret_server: ProviderServer) -> None:
    provider = _provider(secret_server)
    ref = provider.submit({"prompt": "p", "fail": True}, "tok")
    provider.status(ref)
    failed = provider.status(ref)
    assert failed.state is RemoteState.FAILED and failed.error == "generation failed on the provider side"


def test_lookup_finds_by_token_and_says_none_otherwise(secret_server: ProviderServer) -> None:
    provider = _provider(secret_server)
    assert provider.capabilities.lookup and provider.capabilities.idempotent_tokens
    ref = provider.submit({"prompt": "p"}, "tok/with?odd&chars")
    assert provider.find("tok/with?odd&chars") == ref
    assert provider.find("never-used") is None
    secret_server.configure(lookup=False)
    with pytest.raises(ProviderOutcomeUnknown, match="HTTP 501"):
        provider.find("tok/with?odd&chars")  # "not offered" must never read as "no job"


def test_polling_reaches_succeeded_with_cost(file_store: EpisodeStore, secret_server: ProviderServer) -> None:
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), _provider(secret_server)
    ledger.submit(eid, provider, {"prompt": "p", "units": 2})
    done = wait_for_terminal(ledger, eid, provider, timeout=10, initial_delay=0.01, max_delay=0.05)
    assert done.submission.state is SubmissionState.SUCCEEDED
    assert done.submission.cost == 2.5 and done.submission.remote_state == "succeeded"
    assert file_store.get(eid).submission == done.submission


def test_polling_times_out_clearly(file_store: EpisodeStore, server: ProviderServer) -> None:
    server.configure(polls_to_finish=10_000)
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger, provider = SubmissionLedger(file_store), provider_for(server)
    ledger.submit(eid, provider, {"prompt": "p"})
    with pytest.raises(PollTimeout, match=r"not finished after 0\.2s") as timed_out:
        wait_for_terminal(ledger, eid, provider, timeout=0.2, initial_delay=0.01, max_delay=0.05)
    assert timed_out.value.last_state == "running"
    assert file_store.get(eid).submission.state is SubmissionState.ACCEPTED


def test_astatus_on_the_event_loop(secret_server: ProviderServer) -> None:
    provider = _provider(secret_server)
    ref = provider.submit({"prompt": "p"}, "tok")

    async def twice() -> list[RemoteState]:
        first = await provider.astatus(ref)
        second = await provider.astatus(ref)
        return [first.state, second.state]

    assert asyncio.run(twice()) == [RemoteState.RUNNING, RemoteState.SUCCEEDED]


def test_config_round_trips_through_json_and_refuses_nonsense() -> None:
    config = HttpProviderConfig(
        base_url="https://api.example.invalid/v1", lookup_path="/jobs?token={token}", state_map={"done!": "succeeded"}
    )
    assert HttpProviderConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert config.capabilities.idempotent_tokens and config.capabilities.lookup
    assert not HttpProviderConfig(base_url="http://h", idempotency_header=None).capabilities.idempotent_tokens
    for bad in (
        {"base_url": "ftp://h"},
        {"base_url": "http://user:pw@h"},
        {"base_url": "http://h", "status_path": "/jobs"},
        {"base_url": "http://h", "lookup_path": "/find"},
        {"base_url": "http://h", "state_map": {"x": "finished"}},
        {"base_url": "http://h", "read_timeout": -1},
        {"base_url": "http://h", "auth_value": "secret"},
    ):
        with pytest.raises(InvalidConfiguration):
            HttpProviderConfig.from_dict(bad)


def test_the_server_runs_as_a_separate_process(tmp_path: Path) -> None:
    state_file = tmp_path / "provider-state.json"
    env = {**os.environ, "PROVIDER_SERVER_TOKEN": SECRET}
    command = [
        sys.executable,
        "-m",
        "airflow_idempotent_jobs.testing.server",
        "--port",
        "0",
        "--state-file",
        str(state_file),
    ]
    process = subprocess.Popen([*command, "--ignore-tokens"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        from airflow_idempotent_jobs.testing.server import server_provider_config

        provider = HttpPaidProvider(
            server_provider_config(url, tokens_honoured=False),
            auth_header="Authorization",
            auth_value=f"Bearer {SECRET}",
        )
        assert not provider.capabilities.idempotent_tokens and provider.capabilities.lookup
        first = provider.submit({"prompt": "p"}, "same-token")
        second = provider.submit({"prompt": "p"}, "same-token")  # tokens ignored: a duplicate, by design
        assert first != second
        headers = {"Authorization": f"Bearer {SECRET}"}
        switched = httpx.post(f"{url}/_admin/config", json={"fault": "4xx"}, headers=headers, timeout=10)
        assert switched.status_code == 200 and switched.json()["fault"] == "4xx"
        with pytest.raises(ProviderRejected):
            provider.submit({"prompt": "p"}, "other")
        stats = httpx.get(f"{url}/_admin/stats", headers=headers, timeout=10).json()
        assert stats["accepted_per_token"] == {"same-token": 2}
        assert stats["submissions"] == 3
        assert httpx.get(f"{url}/_admin/stats", timeout=10).status_code == 401
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=PROCESS_TIMEOUT) == 0
    saved = json.loads(state_file.read_text())
    assert saved["counters"]["accepted"] == 2 and len(saved["jobs"]) == 2
