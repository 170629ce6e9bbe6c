"""What the batch inference tests share: a CreateModelInvocationJob request, its prices, and boto3's
``bedrock`` and ``s3`` clients at the local control-plane double (boto3's default retry mode; short
timeouts, so a held answer is a read timeout)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from airflow_idempotent_jobs.vendors.bedrock.batch_inference import BedrockBatchInferenceProvider

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
JOB: dict[str, Any] = {
    "roleArn": "arn:aws:iam::123456789012:role/bedrock-batch",
    "modelId": MODEL,
    "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://weekly-prompts/2026-W32/records.jsonl"}},
    "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://weekly-answers/2026-W32/"}},
    "jobName": "weekly",
}
#: Batch prices per million tokens (half the on-demand ones).
PRICES = {MODEL: {"input": 0.125, "output": 0.625}}
_KEYS = {"region_name": "us-east-1", "aws_access_key_id": "AKIDLOCALDOUBLE", "aws_secret_access_key": "local-secret"}


def control_client(url: str, **config: Any) -> Any:
    """boto3's bedrock client at ``url`` (``config``: botocore Config options over the defaults here)."""
    options = Config(**{"connect_timeout": 2, "read_timeout": 1, **config})
    return boto3.client("bedrock", endpoint_url=url, config=options, **_KEYS)


def s3_client(url: str) -> Any:
    """boto3's s3 client at the same double (path-style: the bucket is the path's first segment)."""
    config = Config(connect_timeout=2, read_timeout=1, s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=url, config=config, **_KEYS)


def batch_provider_at(
    url: str, *, manifest: bool = True, read_timeout: float = 1.0, **options: Any
) -> BedrockBatchInferenceProvider:
    """The batch provider on fresh clients at ``url``, as a new process would build it."""
    s3 = (lambda: s3_client(url)) if manifest else None
    options.setdefault("prices", PRICES)
    client = lambda: control_client(url, read_timeout=read_timeout)  # noqa: E731 (the factory the hook passes)
    return BedrockBatchInferenceProvider(client, s3_client_factory=s3, **options)
