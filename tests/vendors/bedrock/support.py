"""What the Bedrock tests share: a StartAsyncInvoke request, its price, and boto3's bedrock-runtime client
at a local double (boto3's default retry mode; short timeouts, so a held answer is a read timeout)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from airflow_idempotent_jobs.vendors.bedrock import BedrockAsyncInvokeProvider

START: dict[str, Any] = {
    "modelId": "amazon.nova-reel-v1:0",
    "modelInput": {
        "taskType": "TEXT_VIDEO",
        "textToVideoParams": {"text": "the week in review"},
        "videoGenerationConfig": {"durationSeconds": 6, "fps": 24, "dimension": "1280x720"},
    },
    "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://weekly-media/2026-W32/"}},
}
PRICES = {START["modelId"]: {"per_second": 0.08}}


def runtime_client(url: str, **config: Any) -> Any:
    """boto3's bedrock-runtime client at ``url`` (``config``: botocore Config options over the defaults here)."""
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="AKIDLOCALDOUBLE",
        aws_secret_access_key="local-double-secret",
        config=Config(**{"connect_timeout": 2, "read_timeout": 1, **config}),
    )


def provider_at(url: str, prices: dict[str, Any] | None = None) -> BedrockAsyncInvokeProvider:
    """The async-invoke provider on a fresh client at ``url``, as a new process would build it."""
    return BedrockAsyncInvokeProvider(lambda: runtime_client(url), prices=prices or PRICES)
