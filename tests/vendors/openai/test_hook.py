"""`OpenAIBatchHook` reads an ``openai`` Connection as apache-airflow-providers-openai's hook does (in-process,
``AIRFLOW_CONN_OPENAI_DEFAULT`` as JSON), and the provider it builds pays through the local double."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.hooks.paid_provider import build_provider, construct_hook
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.openai_api import OpenAIApi
from airflow_idempotent_jobs.vendors.openai import OpenAIBatchHook, OpenAIBatchProvider
from tests.vendors.openai.support import PRICES, chat_request, expected_cost

pytestmark = pytest.mark.airflow


def set_default(monkeypatch: pytest.MonkeyPatch, **fields: Any) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_OPENAI_DEFAULT", json.dumps({"conn_type": "openai", **fields}))


def test_a_teams_openai_default_connection_works_unchanged(api: OpenAIApi, monkeypatch: pytest.MonkeyPatch) -> None:
    set_default(monkeypatch, host=api.base_url, password=api.api_key, extra={"batch_prices": json.dumps(PRICES)})
    hook = construct_hook(OpenAIBatchHook, "openai_default")
    assert hook.provider_conn_id == "openai_default" == OpenAIBatchHook.default_conn_name
    adapter = build_provider(hook)
    assert isinstance(adapter, OpenAIBatchProvider)
    request = chat_request(2)
    done = adapter.status(adapter.submit(request, "tok-hook"))
    assert done.state is RemoteState.SUCCEEDED
    assert done.cost == pytest.approx(expected_cost([r["body"] for r in request["requests"]]))


def test_the_client_kwargs_override_host_and_password(api: OpenAIApi, monkeypatch: pytest.MonkeyPatch) -> None:
    client = {"base_url": api.base_url, "api_key": api.api_key, "max_retries": 0, "timeout": 3}
    set_default(
        monkeypatch, host="http://127.0.0.1:9/wrong", password="sk-wrong", extra={"openai_client_kwargs": client}
    )
    adapter = OpenAIBatchHook(prices=PRICES).get_provider()
    assert adapter.status(adapter.submit(chat_request(1), "tok-kwargs")).state is RemoteState.SUCCEEDED
    assert api.stats()["unauthorized"] == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"password": "sk-x", "extra": {"auth_type": "workload_identity"}}, "auth_type"),
        ({"extra": {"batch_prices": PRICES}}, "password"),
        ({"password": "sk-x"}, "batch_prices"),
        ({"password": "sk-x", "extra": {"batch_prices": "{not json"}}, "batch_prices"),
        (
            {"password": "sk-x", "extra": {"batch_prices": {"gpt-5-mini": {"input": -1, "output": 1}}}},
            "gpt-5-mini.input",
        ),
        ({"password": "sk-x", "extra": {"batch_prices": PRICES, "openai_client_kwargs": "x"}}, "openai_client_kwargs"),
        (
            {"password": "sk-x", "extra": {"batch_prices": PRICES, "openai_client_kwargs": {"bogus": 1}}},
            "openai_client_kwargs",
        ),
    ],
)
def test_a_connection_that_cannot_work_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], field: str
) -> None:
    set_default(monkeypatch, **fields)
    with pytest.raises(InvalidConfiguration) as refused:
        OpenAIBatchHook().get_provider()
    assert refused.value.field == field and "sk-x" not in str(refused.value)


def test_importing_the_provider_imports_no_airflow() -> None:
    code = (
        "import sys, airflow_idempotent_jobs.vendors.openai\n"
        "print(any(m.partition('.')[0] == 'airflow' for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
