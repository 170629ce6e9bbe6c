"""`AnthropicBatchHook` reads Airflow's ``anthropic`` connection (an ``AIRFLOW_CONN_*`` JSON), in this process.

The provider it builds pays through the local API; refused settings are one line naming the field,
before anything is sent. Importing the provider alone never imports Airflow (checked in a fresh
interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.anthropic_api import AnthropicApi
from tests.vendors.anthropic.support import PRICES, REQUEST, expected_cost

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="ij-anthropic-hook-"))  # never ~/airflow
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")


@pytest.fixture
def api() -> Iterator[AnthropicApi]:
    with AnthropicApi(api_key="sk-ant-hook-test-5b7", polls_to_finish=1) as running:
        yield running


def connect(monkeypatch: pytest.MonkeyPatch, **fields: Any) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ANTHROPIC_DEFAULT", json.dumps({"conn_type": "anthropic", **fields}))


def test_the_hook_builds_a_provider_from_the_anthropic_connection(
    api: AnthropicApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_idempotent_jobs.hooks.paid_provider import build_provider
    from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchHook

    extra = {"anthropic_client_kwargs": {"timeout": 5.0}, "batch_prices": PRICES}
    connect(monkeypatch, host=api.url, password=api.api_key, extra=extra)
    hook = AnthropicBatchHook()
    assert hook.provider_conn_id == "anthropic_default"
    provider = build_provider(hook)
    ref = provider.submit(REQUEST, "token-hook")
    done = provider.status(ref)
    assert done.state is RemoteState.SUCCEEDED and done.cost == pytest.approx(expected_cost(REQUEST), rel=1e-12)
    assert api.accepted() == 1


def test_the_hook_writes_the_results_to_storage_with_the_users_custom_ids(
    api: AnthropicApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchHook

    connect(monkeypatch, host=api.url, password=api.api_key, extra={"batch_prices": PRICES})
    hook = AnthropicBatchHook()
    provider = hook.get_provider()
    ref = provider.submit(REQUEST, "token-storage")
    assert provider.status(ref).state is RemoteState.SUCCEEDED
    target = tmp_path / "2026-W32.jsonl"
    assert hook.write_results(ref, f"file://{target}") == len(REQUEST["requests"])
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert sorted(line["custom_id"] for line in lines) == sorted(r["custom_id"] for r in REQUEST["requests"])
    assert os.listdir(tmp_path) == ["2026-W32.jsonl"]  # no partial file left
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(InvalidConfiguration, match="is a link"):
        hook.write_results(ref, str(link))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"password": "k", "extra": {"platform": "bedrock", "batch_prices": PRICES}}, "platform"),
        ({"password": "k", "extra": {"workload_identity": {"x": 1}, "batch_prices": PRICES}}, "workload_identity"),
        ({"extra": {"batch_prices": PRICES}}, "password"),
        ({"password": "k"}, "batch_prices"),
        ({"password": "k", "extra": {"batch_prices": {"m": {"input": -1, "output": 1}}}}, "m.input"),
        (
            {"password": "k", "extra": {"anthropic_client_kwargs": "x", "batch_prices": PRICES}},
            "anthropic_client_kwargs",
        ),
        (
            {"password": "k", "extra": {"anthropic_client_kwargs": {"bogus": 1}, "batch_prices": PRICES}},
            "anthropic_client_kwargs",
        ),
    ],
)
def test_settings_that_cannot_work_name_their_field(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], field: str
) -> None:
    from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchHook

    connect(monkeypatch, host="http://127.0.0.1:9", **fields)
    with pytest.raises(InvalidConfiguration) as refused:
        AnthropicBatchHook().get_provider()
    assert refused.value.field == field
    assert "\n" not in str(refused.value)


def test_prices_given_to_the_hook_win_over_the_extra(api: AnthropicApi, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.vendors.anthropic import AnthropicBatchHook

    connect(
        monkeypatch, host=api.url, password=api.api_key, extra={"batch_prices": {"other": {"input": 1, "output": 1}}}
    )
    provider = AnthropicBatchHook(prices=PRICES).get_provider()
    assert provider.worst_case(REQUEST) > 0


def test_importing_the_provider_imports_no_airflow() -> None:
    code = "import sys, airflow_idempotent_jobs.vendors.anthropic as a; print('airflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
