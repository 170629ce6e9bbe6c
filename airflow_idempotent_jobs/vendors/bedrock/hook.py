"""`BedrockHook`: Bedrock's paid calls from Airflow's own ``aws`` connection type, read as the amazon provider reads it.

As ``AwsConnectionWrapper`` does: login/password (else extra ``aws_access_key_id`` /
``aws_secret_access_key``), extra ``aws_session_token``, ``region_name``, ``profile_name``,
``verify``, ``config_kwargs`` (a botocore ``Config``) and the endpoint: extra
``service_config[<service>]["endpoint_url"]``, else ``endpoint_url``. With no key in the connection,
boto3's own credential chain applies (the environment, an instance or pod role), as for every amazon
operator. ``role_arn`` (assume a role) is refused for now: the role's session would have to be
renewed across the triggerer's polls, which is not written yet.

Which API: the hook argument ``api`` or the extra ``bedrock_api``: ``async_invoke`` (the default:
``StartAsyncInvoke``, service ``bedrock-runtime``) or ``batch_inference``
(``CreateModelInvocationJob``, service ``bedrock``). `BedrockAsyncInvokeHook` and
`BedrockBatchInferenceHook` fix it, for ``provider_hook=``. Prices: the ``prices`` argument, else the
extra ``bedrock_prices``: for async invoke ``{model: {"per_second": X}}`` (seconds of video) or
``{"per_invocation": X}``; for batch inference the batch prices per million tokens, ``{model: {"input":
X, "output": Y}}``, applied to the token counts of the job's output manifest, read from S3 through
the same connection (``service_config["s3"]`` or ``endpoint_url``). The paid operator picks this
hook for an ``aws`` connection by itself (`VENDOR_HOOKS`), whatever hook the amazon provider
registers for that type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import boto3
from botocore.config import Config

from ...airflow_compat import mask_secret
from ...errors import InvalidConfiguration
from ...hooks.paid_provider import PaidProviderHook
from ...paid.provider import PaidProvider
from .async_invoke import BedrockAsyncInvokeProvider
from .batch_inference import BedrockBatchInferenceProvider

__all__ = ["BedrockAsyncInvokeHook", "BedrockBatchInferenceHook", "BedrockHook"]

_WHAT: Final = "aws connection"
#: Each API this hook pays through, and the boto3 service it is a client of.
SERVICES: Final = {"async_invoke": "bedrock-runtime", "batch_inference": "bedrock"}
#: Connection extras that name an identity this hook does not assume yet.
_REFUSED: Final = ("role_arn", "assume_role_method", "assume_role_kwargs")


class BedrockHook(PaidProviderHook):
    """Builds a Bedrock paid provider from an ``aws`` Connection (module docstring)."""

    default_conn_name = "aws_default"
    conn_type = "aws"
    hook_name = "Amazon Bedrock (idempotent)"
    #: The API a subclass fixes; None: the ``api`` argument, else the extra ``bedrock_api``.
    api: str | None = None

    def __init__(
        self,
        provider_conn_id: str | None = None,
        *,
        prices: Mapping[str, Any] | None = None,
        api: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(provider_conn_id, **kwargs)
        self.prices = prices
        if api is not None:
            if self.api is not None and api != self.api:
                raise TypeError(f"{type(self).__name__} pays through {self.api} only")
            self.api = api

    def get_provider(self) -> PaidProvider:
        conn = self.get_connection(self.provider_conn_id)
        extra = conn.extra_dejson
        if not isinstance(extra, Mapping):
            raise InvalidConfiguration(_WHAT, "extra", "must be a JSON object")
        api = self.api or extra.get("bedrock_api") or "async_invoke"
        if api not in SERVICES:
            raise InvalidConfiguration(_WHAT, "bedrock_api", f"{api!r:.60} is not one of {', '.join(SERVICES)}")
        for key in _REFUSED:
            if extra.get(key):
                raise InvalidConfiguration(_WHAT, key, "assuming a role is not supported yet: give the role's keys")
        raw_prices = self.prices if self.prices is not None else extra.get("bedrock_prices")
        if raw_prices is None:
            raise InvalidConfiguration(_WHAT, "bedrock_prices", "set each model's price (extra or prices=)")
        client = bedrock_client(conn.login, conn.password, extra, SERVICES[api])
        if api == "batch_inference":
            s3 = bedrock_client(conn.login, conn.password, extra, "s3")  # the output manifest: the cost
            return BedrockBatchInferenceProvider(lambda: client, prices=raw_prices, s3_client_factory=lambda: s3)
        return BedrockAsyncInvokeProvider(lambda: client, prices=raw_prices)


class BedrockAsyncInvokeHook(BedrockHook):
    """`BedrockHook` for ``StartAsyncInvoke`` whatever the connection's ``bedrock_api`` says."""

    api = "async_invoke"


class BedrockBatchInferenceHook(BedrockHook):
    """`BedrockHook` for ``CreateModelInvocationJob`` whatever the connection's ``bedrock_api`` says."""

    api = "batch_inference"


def bedrock_client(login: str | None, password: str | None, extra: Mapping[str, Any], service: str) -> Any:
    """boto3's ``service`` client as the connection describes it; a setting that cannot work is
    `InvalidConfiguration` in one line, before anything is sent."""
    key_id, secret = (
        (login, password)
        if login and password
        else (
            extra.get("aws_access_key_id"),
            extra.get("aws_secret_access_key"),
        )
    )
    if bool(key_id) != bool(secret):
        raise InvalidConfiguration(_WHAT, "aws_secret_access_key", "give both the key id and its secret, or neither")
    session_token = extra.get("aws_session_token")
    for name, value in (
        ("aws_access_key_id", key_id),
        ("aws_secret_access_key", secret),
        ("aws_session_token", session_token),
    ):
        if value is not None and not isinstance(value, str):
            raise InvalidConfiguration(_WHAT, name, "must be a string")
    for secret_value in (secret, session_token):
        if secret_value:
            mask_secret(secret_value)  # an extra's secret is not masked by Airflow
    region = extra.get("region_name")
    if not isinstance(region, str) or not region:
        raise InvalidConfiguration(_WHAT, "region_name", "set the region Bedrock runs in (the extra region_name)")
    service_config = extra.get("service_config") or {}
    own = service_config.get(service) if isinstance(service_config, Mapping) else None
    if not isinstance(service_config, Mapping) or (own is not None and not isinstance(own, Mapping)):
        raise InvalidConfiguration(_WHAT, "service_config", f"must be an object of objects ({service!r}: {{...}})")
    endpoint = (own or {}).get("endpoint_url") or extra.get("endpoint_url") or None
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://"))):
        raise InvalidConfiguration(_WHAT, "endpoint_url", f"{endpoint!r:.100} is not an http(s) URL")
    config_kwargs = extra.get("config_kwargs") or {}
    if not isinstance(config_kwargs, Mapping):
        raise InvalidConfiguration(_WHAT, "config_kwargs", "must be an object of botocore Config options")
    try:
        config = Config(**config_kwargs)
    except TypeError as exc:
        raise InvalidConfiguration(_WHAT, "config_kwargs", str(exc)[:200]) from None
    profile = extra.get("profile_name")
    verify = extra.get("verify")
    try:
        session = boto3.session.Session(
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            aws_session_token=session_token,
            region_name=region,
            profile_name=profile,
        )
        return session.client(service, endpoint_url=endpoint, config=config, verify=verify)
    except Exception as exc:  # a profile that is not there, a bad verify path: one line, nothing sent
        raise InvalidConfiguration(_WHAT, "extra", f"boto3 cannot build the {service} client: {exc}"[:300]) from None
