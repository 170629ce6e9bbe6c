"""`BedrockHook` reads Airflow's ``aws`` connection (an ``AIRFLOW_CONN_*`` JSON) as the amazon provider does,
in this process.

The provider it builds pays through the local double with real boto3; refused settings are one line
naming the field, before anything is sent, and never show a secret. Importing the provider alone
never imports Airflow (checked in a fresh interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.paid import RemoteState
from airflow_idempotent_jobs.testing.bedrock_api import BedrockRuntimeApi
from tests.vendors.bedrock.support import PRICES, START

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="ij-bedrock-hook-"))  # never ~/airflow
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

SECRET = "bedrock-hook-secret-7f3a9c"
SESSION_TOKEN = "bedrock-hook-session-2b8e41"
DEAD = "http://127.0.0.1:9"  # nothing answers there


@pytest.fixture
def api() -> Iterator[BedrockRuntimeApi]:
    with BedrockRuntimeApi(polls_to_finish=1) as running:
        yield running


def connect(monkeypatch: pytest.MonkeyPatch, conn_id: str = "aws_default", **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", **fields}))


def extra(url: str, **more: Any) -> dict[str, Any]:
    return {"region_name": "us-east-1", "endpoint_url": url, "bedrock_prices": PRICES, **more}


def test_the_hook_builds_a_provider_from_the_aws_connection(
    api: BedrockRuntimeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_idempotent_jobs.hooks.paid_provider import build_provider
    from airflow_idempotent_jobs.vendors.bedrock import BedrockAsyncInvokeProvider, BedrockHook

    connect(monkeypatch, login="AKIDHOOKTEST", password=SECRET, extra=extra(api.url))
    hook = BedrockHook()
    assert hook.provider_conn_id == "aws_default"
    provider = build_provider(hook)
    assert isinstance(provider, BedrockAsyncInvokeProvider)
    ref = provider.submit(START, "token-hook")
    assert provider.submit(START, "token-hook") == ref  # the token, honoured
    done = provider.status(ref)
    assert done.state is RemoteState.SUCCEEDED and done.result["invocation_arn"] == ref
    assert api.accepted() == 1
    assert provider.billing_identity() == {"api": "bedrock-runtime", "endpoint": api.url, "region": "us-east-1"}


def test_the_batch_inference_api_pays_once_and_reads_its_cost_from_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.testing.bedrock_control_api import BedrockControlApi
    from airflow_idempotent_jobs.vendors.bedrock import BedrockBatchInferenceProvider, BedrockHook
    from tests.vendors.bedrock.batch_support import JOB
    from tests.vendors.bedrock.batch_support import PRICES as BATCH_PRICES

    with BedrockControlApi(polls_to_finish=1, input_tokens=40_000, output_tokens=8_000) as control:
        settings = extra(DEAD, bedrock_api="batch_inference", bedrock_prices=BATCH_PRICES)
        settings["service_config"] = {"bedrock": {"endpoint_url": control.url}, "s3": {"endpoint_url": control.url}}
        connect(monkeypatch, login="AKIDHOOKTEST", password=SECRET, extra=settings)
        provider = BedrockHook().get_provider()
        assert isinstance(provider, BedrockBatchInferenceProvider)
        ref = provider.submit(JOB, "token-batch-hook")
        assert provider.submit(JOB, "token-batch-hook") == ref
        done = provider.status(ref)
        assert control.accepted() == 1
    assert done.state is RemoteState.SUCCEEDED
    price = BATCH_PRICES[JOB["modelId"]]
    assert done.cost == pytest.approx((40_000 * price["input"] + 8_000 * price["output"]) / 1e6, rel=1e-12)


def test_the_services_own_endpoint_wins_and_keys_may_sit_in_the_extra(
    api: BedrockRuntimeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_idempotent_jobs.vendors.bedrock import BedrockHook

    settings = extra(
        DEAD,
        service_config={"bedrock-runtime": {"endpoint_url": api.url}, "s3": {"endpoint_url": DEAD}},
        aws_access_key_id="AKIDEXTRA",
        aws_secret_access_key=SECRET,
        aws_session_token=SESSION_TOKEN,
        config_kwargs={"read_timeout": 5, "retries": {"mode": "standard", "max_attempts": 3}},
    )
    connect(monkeypatch, extra=settings)
    provider = BedrockHook().get_provider()
    provider.submit(START, "token-service-config")
    assert api.accepted() == 1
    assert api.stats()["signed_by"] == {"AKIDEXTRA": 1}  # signed with the extra's key


def test_the_prices_argument_wins_over_the_extra(api: BedrockRuntimeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.vendors.bedrock import BedrockHook

    connect(monkeypatch, login="AKIDHOOKTEST", password=SECRET, extra=extra(api.url, bedrock_prices={"x": {}}))
    provider = BedrockHook(prices={START["modelId"]: {"per_invocation": 1.5}}).get_provider()
    assert provider.worst_case(START) == 1.5  # type: ignore[attr-defined]


def test_a_subclass_fixes_its_api(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.vendors.bedrock import BedrockAsyncInvokeHook, BedrockAsyncInvokeProvider

    connect(monkeypatch, login="AKIDHOOKTEST", password=SECRET, extra=extra(DEAD, bedrock_api="batch_inference"))
    assert isinstance(BedrockAsyncInvokeHook().get_provider(), BedrockAsyncInvokeProvider)
    with pytest.raises(TypeError, match="async_invoke only"):
        BedrockAsyncInvokeHook(api="batch_inference")


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"extra": extra(DEAD, bedrock_api="converse")}, "bedrock_api", "'converse' is not one of"),
        ({"extra": extra(DEAD, role_arn="arn:aws:iam::1:role/x")}, "role_arn", "not supported yet"),
        ({"extra": {k: v for k, v in extra(DEAD).items() if k != "bedrock_prices"}}, "bedrock_prices", "set each"),
        ({"extra": {k: v for k, v in extra(DEAD).items() if k != "region_name"}}, "region_name", "set the region"),
        ({"login": None, "extra": extra(DEAD, aws_secret_access_key=SECRET)}, "aws_secret_access_key", "both the"),
        ({"extra": extra("ftp://127.0.0.1/")}, "endpoint_url", "is not an http(s) URL"),
        ({"extra": extra(DEAD, service_config={"bedrock-runtime": "x"})}, "service_config", "object of objects"),
        ({"extra": extra(DEAD, config_kwargs={"no_such_option": 1})}, "config_kwargs", "no_such_option"),
        ({"extra": extra(DEAD, profile_name="no-such-profile")}, "extra", "no-such-profile"),
        ({"extra": extra(DEAD, bedrock_prices={"m": {"per_second": 1e999}})}, "prices['m'].per_second", "finite"),
        ({"extra": extra(DEAD, bedrock_prices={"m": {"per_token": 1}})}, "prices['m']", "per_second or per_inv"),
    ],
    ids=lambda value: value if isinstance(value, str) and " " not in value else None,
)
def test_a_setting_that_cannot_work_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], field: str, said: str
) -> None:
    from airflow_idempotent_jobs.hooks.paid_provider import build_provider, resolve_provider_hook

    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)  # no profile from this machine
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    connect(monkeypatch, **{"login": "AKIDHOOKTEST", "password": SECRET, **fields})
    with pytest.raises(InvalidConfiguration) as caught:
        build_provider(resolve_provider_hook("aws_default"))
    text = str(caught.value)
    assert caught.value.field == field and said in text, text
    assert "\n" not in text and SECRET not in text and not caught.value.retryable


def test_an_aws_connection_resolves_to_our_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.hooks.paid_provider import hook_class_path, resolve_provider_hook

    connect(monkeypatch, "media_aws", login="AKIDHOOKTEST", password=SECRET, extra=extra(DEAD))
    hook = resolve_provider_hook("media_aws")
    assert hook_class_path(hook) == "airflow_idempotent_jobs.vendors.bedrock.hook.BedrockHook"
    assert hook.provider_conn_id == "media_aws"


def test_the_secrets_are_masked_in_airflows_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk._shared.secrets_masker import redact

    from airflow_idempotent_jobs.vendors.bedrock import BedrockHook

    secret, session = f"extra-secret-{uuid.uuid4().hex}", f"session-{uuid.uuid4().hex}"  # new to the masker
    settings = extra(DEAD, aws_access_key_id="AKIDEXTRA", aws_secret_access_key=secret, aws_session_token=session)
    connect(monkeypatch, extra=settings)
    text = f"key {secret} session {session}"
    assert str(redact(text)) == text
    BedrockHook().get_provider()  # Airflow masks the extra's secret-named keys; the hook registers both too
    shown = str(redact(text))
    assert secret not in shown and session not in shown


def test_importing_the_provider_imports_no_airflow() -> None:
    code = (
        "import sys; import airflow_idempotent_jobs.vendors.bedrock as b; b.BedrockAsyncInvokeProvider; "
        "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
