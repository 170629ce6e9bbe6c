"""Amazon Bedrock through boto3: `BedrockAsyncInvokeProvider` (``StartAsyncInvoke``),
`BedrockBatchInferenceProvider` (``CreateModelInvocationJob``), and `BedrockHook` on Airflow's ``aws``
connection.

Bedrock honours ``clientRequestToken``: the episode's token, sent on every try, makes each repetition
harmless (capability (a)), so boto3's own retries stay on for the paid call (unlike the LLM batch
SDKs'). The hooks are loaded on first use (module ``__getattr__``), so importing a provider never
imports Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .async_invoke import BedrockAsyncInvokeProvider, client_request_token
from .batch_inference import BedrockBatchInferenceProvider, batch_job_name, batch_request_token

if TYPE_CHECKING:
    from .hook import BedrockAsyncInvokeHook, BedrockBatchInferenceHook, BedrockHook

__all__ = [
    "BedrockAsyncInvokeHook",
    "BedrockAsyncInvokeProvider",
    "BedrockBatchInferenceHook",
    "BedrockBatchInferenceProvider",
    "BedrockHook",
    "batch_job_name",
    "batch_request_token",
    "client_request_token",
]

_HOOKS = frozenset({"BedrockHook", "BedrockAsyncInvokeHook", "BedrockBatchInferenceHook"})


def __getattr__(name: str) -> Any:
    if name in _HOOKS:
        from . import hook

        return getattr(hook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
