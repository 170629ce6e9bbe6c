"""Amazon Bedrock through boto3 (in progress): `BedrockAsyncInvokeProvider` for ``StartAsyncInvoke``.

Bedrock honours ``clientRequestToken``: the episode's token, sent on every try, makes each repetition
harmless (capability (a)), so boto3's own retries stay on for the paid call (unlike the LLM batch
SDKs'). Not yet here: the hook on Airflow's ``aws`` connection, ``CreateModelInvocationJob``, a
lookup by listing, cost read back from the API.
"""

from __future__ import annotations

from .async_invoke import BedrockAsyncInvokeProvider, client_request_token

__all__ = ["BedrockAsyncInvokeProvider", "client_request_token"]
