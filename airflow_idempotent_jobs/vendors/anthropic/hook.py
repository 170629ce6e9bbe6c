"""`AnthropicBatchHook`: the Anthropic batch provider from Airflow's own ``anthropic`` connection type.

The connection is read as apache-airflow-providers-anthropic's ``AnthropicHook`` reads it for its
``anthropic`` platform: password = API key, host = base URL, extra ``anthropic_client_kwargs``
(passed to ``anthropic.Anthropic``; its ``api_key`` and ``base_url`` win over the fields). The
batch prices come from the hook's ``prices`` argument, else the extra ``batch_prices``. Other
platforms (bedrock, vertex, aws, foundry), ``workload_identity`` and a key left to the environment
are refused for now (`InvalidConfiguration`): the lookup and the price table are written and
tested for Anthropic's own API only. The connection type stays the Anthropic provider's: the paid
operator picks this hook for an ``anthropic`` connection by itself (`VENDOR_HOOKS`), whatever hook
Airflow has registered for that type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anthropic

from ...errors import InvalidConfiguration
from ...hooks.paid_provider import PaidProviderHook
from .._airflow import mask_key, write_to_storage
from ..llm_batch import PriceTable
from .provider import AnthropicBatchProvider

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

__all__ = ["AnthropicBatchHook"]

_WHAT = "anthropic connection"


class AnthropicBatchHook(PaidProviderHook):
    """Builds `AnthropicBatchProvider` from an ``anthropic`` Connection (module docstring)."""

    default_conn_name = "anthropic_default"
    conn_type = "anthropic"
    hook_name = "Anthropic message batches (idempotent)"

    def __init__(self, provider_conn_id: str | None = None, *, prices: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(provider_conn_id, **kwargs)
        self.prices = prices

    def get_provider(self) -> AnthropicBatchProvider:
        conn = self.get_connection(self.provider_conn_id)
        extra = conn.extra_dejson
        platform = str(extra.get("platform") or "anthropic").lower()
        if platform != "anthropic":
            raise InvalidConfiguration(_WHAT, "platform", f"{platform!r:.40} is not supported yet (only 'anthropic')")
        if extra.get("workload_identity"):
            raise InvalidConfiguration(_WHAT, "workload_identity", "is not supported yet: set the API key as password")
        kwargs = extra.get("anthropic_client_kwargs", {})
        if not isinstance(kwargs, Mapping):
            raise InvalidConfiguration(_WHAT, "anthropic_client_kwargs", "must be an object")
        client_kwargs = dict(kwargs)
        api_key = client_kwargs.pop("api_key", None) or conn.password
        base_url = client_kwargs.pop("base_url", None) or conn.host or None
        if not isinstance(api_key, str) or not api_key:
            raise InvalidConfiguration(_WHAT, "password", "set the API key (the environment is not read)")
        raw_prices = self.prices if self.prices is not None else extra.get("batch_prices")
        if raw_prices is None:
            raise InvalidConfiguration(_WHAT, "batch_prices", "set each model's batch prices (extra or prices=)")
        mask_key(api_key)

        def client() -> anthropic.Anthropic:
            return anthropic.Anthropic(api_key=api_key, base_url=base_url, **client_kwargs)

        try:
            client()  # a wrong keyword fails here, before anything is sent
        except TypeError as exc:
            raise InvalidConfiguration(_WHAT, "anthropic_client_kwargs", str(exc)[:200]) from None
        return AnthropicBatchProvider(client, prices=PriceTable.parse(raw_prices))

    def write_results(self, batch_id: str, destination: str | ObjectStoragePath) -> int:
        """Stream an ended batch's results (JSON lines, your own custom_ids) to ``destination``; lines written.

        ``destination``: a path or URL Airflow's object storage reaches (``file:///data/w32.jsonl``,
        ``s3://bucket/w32.jsonl``) or an `ObjectStoragePath`. A failed write leaves no partial file.
        """
        provider = self.get_provider()
        return write_to_storage(destination, lambda out: provider.write_results(batch_id, out))
