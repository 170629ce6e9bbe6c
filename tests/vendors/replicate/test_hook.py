"""`ReplicateHook` reads an ``idempotent_jobs_replicate`` connection (an ``AIRFLOW_CONN_*`` JSON), in this process.

The provider it builds pays through the local API; refused settings are one line naming the field,
before anything is sent. Airflow's providers manager maps the connection type to the hook (provider
info), so ``resolve_provider_hook`` finds it from the connection alone. Importing the provider never
imports Airflow, and provider info never imports the SDK (checked in fresh interpreters).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.get_provider_info import get_provider_info
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.replicate_api import ReplicateApi
from tests.vendors.replicate.support import MODEL, PRICES, REQUEST, expected_cost

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="ij-replicate-hook-"))  # never ~/airflow
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

CONN_TYPE = "idempotent_jobs_replicate"


@pytest.fixture
def api() -> Iterator[ReplicateApi]:
    with ReplicateApi(api_token="r8_hooktest0000000005b7", polls_to_finish=1) as running:
        yield running


def connect(monkeypatch: pytest.MonkeyPatch, conn_id: str = "replicate_default", **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": CONN_TYPE, **fields}))


def test_the_hook_builds_a_provider_from_its_connection(api: ReplicateApi, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.hooks.paid_provider import build_provider
    from airflow_idempotent_jobs.vendors.replicate import ReplicateHook, ReplicatePredictionProvider

    connect(monkeypatch, host=api.url + "/v1", password=api.api_token, extra={"prices": PRICES, "timeout": 5})
    hook = ReplicateHook()
    assert hook.provider_conn_id == "replicate_default"
    provider = build_provider(hook)
    assert isinstance(provider, ReplicatePredictionProvider) and provider.capabilities.lookup
    done = provider.status(provider.submit(REQUEST, "token-hook"))
    assert done.state is RemoteState.SUCCEEDED and done.cost == pytest.approx(expected_cost(2.5), rel=1e-12)
    assert api.accepted("token-hook") == 1


def test_the_connection_type_resolves_to_the_hook(api: ReplicateApi, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.hooks.paid_provider import resolve_provider_hook
    from airflow_idempotent_jobs.vendors.replicate import ReplicateHook

    (entry,) = [c for c in get_provider_info()["connection-types"] if c["connection-type"] == CONN_TYPE]
    assert entry["hook-class-name"] == "airflow_idempotent_jobs.vendors.replicate.hook.ReplicateHook"
    assert entry["ui-field-behaviour"]["relabeling"] == ReplicateHook.get_ui_field_behaviour()["relabeling"]
    connect(monkeypatch, "media_replicate", host=api.url, password=api.api_token, extra={"prices": PRICES})
    hook = resolve_provider_hook("media_replicate")
    assert type(hook) is ReplicateHook and hook.provider_conn_id == "media_replicate"


def test_a_bare_host_gets_https_and_its_port(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.vendors.replicate import ReplicateHook

    connect(monkeypatch, host="replicate.internal", port=8443, password="r8_k", extra={"prices": PRICES})
    assert ReplicateHook().get_provider().base_url == "https://replicate.internal:8443"
    connect(monkeypatch, password="r8_k", extra={"prices": PRICES, "token_input": None})
    provider = ReplicateHook().get_provider()
    assert provider.base_url == "https://api.replicate.com" and not provider.capabilities.lookup


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"extra": {"prices": PRICES}}, "password"),
        ({"password": "r8_k"}, "prices"),
        ({"password": "r8_k", "extra": {"prices": {MODEL: {"per_second": -1}}}}, f"{MODEL}.per_second"),
        ({"password": "r8_k", "extra": {"prices": PRICES, "api_token": "x"}}, "api_token"),
        ({"password": "r8_k", "extra": {"prices": PRICES, "timeout": "soon"}}, "timeout"),
        ({"password": "r8_k", "extra": {"prices": PRICES, "token_input": "not an input"}}, "token_input"),
        ({"password": "r8_k", "host": "ftp://x", "extra": {"prices": PRICES}}, "base_url"),
    ],
)
def test_settings_that_cannot_work_name_their_field(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], field: str
) -> None:
    from airflow_idempotent_jobs.vendors.replicate import ReplicateHook

    connect(monkeypatch, **{"host": "http://127.0.0.1:9", **fields})
    with pytest.raises(InvalidConfiguration) as refused:
        ReplicateHook().get_provider()
    assert refused.value.field == field
    assert "\n" not in str(refused.value) and "r8_k" not in str(refused.value)


def test_prices_given_to_the_hook_win_over_the_extra(api: ReplicateApi, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.vendors.replicate import ReplicateHook

    connect(monkeypatch, host=api.url, password=api.api_token, extra={"prices": {"other/model": {"per_second": 1}}})
    provider = ReplicateHook(prices={MODEL: {"per_second": 0.001, "max_seconds": 60}}).get_provider()
    assert provider.worst_case is not None and provider.worst_case(REQUEST) == pytest.approx(0.06)


def test_importing_the_provider_imports_no_airflow_and_provider_info_no_sdk() -> None:
    code = "import sys, airflow_idempotent_jobs.vendors.replicate.provider; print('airflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
    code = (
        "import sys; from airflow_idempotent_jobs.get_provider_info import get_provider_info; get_provider_info(); "
        "print('replicate' in sys.modules, 'airflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False False"
