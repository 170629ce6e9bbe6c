"""The example adapters' hooks, in process: plain ``http`` Connections (``AIRFLOW_CONN_*``) become providers,
bad ones fail naming the field, and the trigger re-creates each provider from its class path."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.hooks.paid_provider import resolve_provider_hook
from airflow_idempotent_jobs.paid import RemoteState, SubmissionLedger
from airflow_idempotent_jobs.triggers.paid_job import PaidJobTrigger
from example_adapters.batch_api import BatchApi
from example_adapters.batch_style import BatchStyleProvider
from example_adapters.prediction_api import PredictionApi
from example_adapters.prediction_style import PredictionStyleProvider

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(120)]

API_TOKEN = "hook-api-token-3f9a1c"
#: hook class path -> (API server class, provider class)
STYLES: dict[str, tuple[Any, Any]] = {
    "example_adapters.prediction_style.PredictionStyleHook": (PredictionApi, PredictionStyleProvider),
    "example_adapters.batch_style.BatchStyleHook": (BatchApi, BatchStyleProvider),
}


@pytest.fixture(params=list(STYLES), ids=["prediction", "batch"])
def style(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Any]]:
    hook, (api_class, provider_class) = request.param, STYLES[request.param]
    with api_class(auth_token=API_TOKEN, polls_to_finish=2) as api:
        yield hook, api, provider_class


def set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "http", **fields}))


def test_an_http_connection_builds_the_provider(monkeypatch: pytest.MonkeyPatch, style: tuple[str, Any, Any]) -> None:
    hook_path, api, provider_class = style
    set_conn(monkeypatch, "ij_api", host=api.url, password=API_TOKEN)
    hook = resolve_provider_hook("ij_api", hook_path)
    provider = hook.get_provider()
    assert isinstance(provider, provider_class)
    assert provider.base_url == api.url and provider.capabilities.lookup
    assert API_TOKEN not in repr(provider)
    ref = provider.submit({"prompt": "p"}, "aij-token-1")
    assert provider.find("aij-token-1") == ref

    host, port = api.url.removeprefix("http://").split(":")
    set_conn(
        monkeypatch, "ij_parts", host=host, port=int(port), schema="http", password=API_TOKEN, extra={"lookup": "false"}
    )
    parts: Any = resolve_provider_hook("ij_parts", hook_path).get_provider()
    assert parts.base_url == api.url and not parts.capabilities.lookup


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"host": "http://127.0.0.1:9"}, "password"),
        ({"host": "", "password": API_TOKEN}, "host"),
        ({"host": "ftp://127.0.0.1", "password": API_TOKEN}, "host"),
        ({"host": "http://127.0.0.1:9", "port": 10, "password": API_TOKEN}, "port"),
        ({"host": "http://127.0.0.1:9", "password": API_TOKEN, "extra": {"lookup": "maybe"}}, "lookup"),
        ({"host": "http://127.0.0.1:9", "password": API_TOKEN, "extra": {"read_timeout": "nan"}}, "read_timeout"),
        ({"host": "http://127.0.0.1:9", "password": API_TOKEN, "extra": {"tokens": True}}, "extra"),
        ({"host": "http://127.0.0.1:9", "password": "tab\tin token"}, "password"),
    ],
)
@pytest.mark.parametrize("hook_path", list(STYLES))
def test_a_connection_that_cannot_work_names_its_field(
    monkeypatch: pytest.MonkeyPatch, hook_path: str, fields: dict[str, Any], field: str
) -> None:
    set_conn(monkeypatch, "ij_bad", **fields)
    with pytest.raises(InvalidConfiguration) as bad:
        resolve_provider_hook("ij_bad", hook_path).get_provider()
    assert bad.value.field == field and not bad.value.retryable
    assert "tab\tin token" not in str(bad.value)


def test_the_trigger_rebuilds_the_provider_from_its_hook_path(
    monkeypatch: pytest.MonkeyPatch, style: tuple[str, Any, Any], tmp_path: Path
) -> None:
    hook_path, api, _ = style
    set_conn(monkeypatch, "ij_api", host=api.url, password=API_TOKEN)
    store = open_store(tmp_path / "store")
    eid = store.allocate("2026-W32", "trigger").episode_id
    provider = resolve_provider_hook("ij_api", hook_path).get_provider()
    ref = SubmissionLedger(store).submit(eid, provider, {"prompt": "p", "units": 2}).submission.remote_ref
    assert ref is not None
    trigger = PaidJobTrigger(
        episode_id=eid, remote_ref=ref, provider_conn_id="ij_api", provider_hook=hook_path, poll_initial_delay=0.01
    )

    async def run() -> list[Any]:
        return [event.payload async for event in trigger.run()]

    (payload,) = asyncio.run(run())
    assert payload["status"] == "terminal" and payload["state"] == RemoteState.SUCCEEDED.value, payload
    assert payload["cost"] == 2.5 and payload["remote_ref"] == ref
    assert api.stats()["status_calls"] >= 2


def test_test_connection_probes_the_api_without_creating_a_job(
    monkeypatch: pytest.MonkeyPatch, style: tuple[str, Any, Any]
) -> None:
    hook_path, api, _ = style
    set_conn(monkeypatch, "ij_api", host=api.url, password=API_TOKEN)
    ok, message = resolve_provider_hook("ij_api", hook_path).test_connection()
    assert ok and "token accepted" in message, message
    set_conn(monkeypatch, "ij_wrong", host=api.url, password="wrong-token-9")
    ok, message = resolve_provider_hook("ij_wrong", hook_path).test_connection()
    assert not ok and "HTTP 401" in message and "wrong-token-9" not in message, message
    assert api.accepted() == 0
