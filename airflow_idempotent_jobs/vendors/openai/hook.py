"""`OpenAIBatchHook`: an ``openai`` Connection (apache-airflow-providers-openai's type) as a paid batch provider.

The Connection is read exactly as that provider's ``OpenAIHook._client_kwargs`` reads it, so a
team's ``openai_default`` works unchanged: password = API key, host = base URL, extra
``openai_client_kwargs`` (``base_url``, ``api_key``, ``organization``, ``project``, ``timeout``,
``max_retries``, ... passed to ``openai.OpenAI``; ``max_retries`` only governs reads, never the
paid call). ``auth_type`` other than ``api_key`` (``workload_identity``) is refused for now: its
token exchange is a client of its own, not yet checked against the ledger's failure rules.
Batch prices come from the extra ``batch_prices`` (a map, or its JSON text) or the hook's
``prices`` argument; ``batch_clock_skew`` and ``batch_max_pages`` tune the lookup. Without a
``timeout`` of its own the client waits 60 s for an answer (the SDK's default is 600 s).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ...errors import InvalidConfiguration
from ...hooks.paid_provider import PaidProviderHook
from .._airflow import mask_key, write_to_storage
from .provider import OpenAIBatchProvider

if TYPE_CHECKING:
    import openai
    from airflow.sdk import ObjectStoragePath

    from ..llm_batch import PriceTable

__all__ = ["OpenAIBatchHook"]

_WHAT: Final = "OpenAI connection"
_DEFAULT_TIMEOUT: Final = 60.0


class OpenAIBatchHook(PaidProviderHook):
    """Builds an `OpenAIBatchProvider` from the ``openai`` Connection ``conn_id`` names (module docstring)."""

    conn_name_attr = "conn_id"
    default_conn_name = "openai_default"
    conn_type = "openai"
    hook_name = "OpenAI (idempotent batches)"

    def __init__(self, conn_id: str | None = None, *, prices: PriceTable | Mapping[str, Any] | None = None) -> None:
        if conn_id is None:
            super().__init__()
        else:
            super().__init__(conn_id=conn_id)
        self.prices = prices

    def get_provider(self) -> OpenAIBatchProvider:
        conn = self.get_connection(self.provider_conn_id)
        extra = conn.extra_dejson
        kwargs = client_kwargs(self.provider_conn_id, conn.host, conn.password, extra)
        prices = _prices(extra.get("batch_prices"), self.prices)
        options = {name: extra[f"batch_{name}"] for name in ("clock_skew", "max_pages") if f"batch_{name}" in extra}

        def client() -> openai.OpenAI:
            import openai

            try:
                return openai.OpenAI(**kwargs)
            except (TypeError, ValueError, openai.OpenAIError) as exc:
                reason = f"openai.OpenAI refused the client settings: {type(exc).__name__}: {exc}"
                raise InvalidConfiguration(_WHAT, "openai_client_kwargs", reason[:300]) from None

        provider = OpenAIBatchProvider(prices=prices, client_factory=client, **options)
        mask_key(kwargs["api_key"])
        return provider

    def write_output(self, batch_id: str, destination: str | ObjectStoragePath, *, errors: bool = False) -> int:
        """Stream a batch's output file (its error file with ``errors``) to ``destination``; bytes written.

        ``destination``: a path or URL Airflow's object storage reaches (``file:///data/w32.jsonl``,
        ``s3://bucket/w32.jsonl``) or an `ObjectStoragePath`. A failed write leaves no partial file.
        """
        provider = self.get_provider()
        return write_to_storage(destination, lambda out: provider.stream_output(batch_id, out, errors=errors))


def client_kwargs(conn_id: str, host: str | None, password: str | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """``openai.OpenAI``'s arguments, as ``OpenAIHook._client_kwargs`` builds them for ``auth_type`` api_key."""
    auth_type = extra.get("auth_type", "api_key")
    if auth_type != "api_key":
        raise InvalidConfiguration(
            _WHAT,
            "auth_type",
            f"{auth_type!r:.40} on {conn_id!r} is not supported for idempotent batches yet: only api_key",
        )
    raw = extra.get("openai_client_kwargs", {})
    if not isinstance(raw, Mapping):
        raise InvalidConfiguration(_WHAT, "openai_client_kwargs", "must be a map of openai.OpenAI arguments")
    kwargs = dict(raw)
    base_url = kwargs.pop("base_url", None) or host or None
    api_key = kwargs.pop("api_key", None) or password
    if not isinstance(api_key, str) or not api_key.strip():
        raise InvalidConfiguration(_WHAT, "password", f"{conn_id!r} has no API key (the password)")
    kwargs.setdefault("timeout", _DEFAULT_TIMEOUT)
    return {"api_key": api_key, "base_url": base_url, **kwargs}


def _prices(extra: Any, given: PriceTable | Mapping[str, Any] | None) -> PriceTable | Mapping[str, Any]:
    if extra is None:
        if given is None:
            raise InvalidConfiguration(_WHAT, "batch_prices", "set the batch prices per model (extra or prices=)")
        return given
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError:
            raise InvalidConfiguration(_WHAT, "batch_prices", "is text that is not JSON") from None
    if not isinstance(extra, Mapping):
        raise InvalidConfiguration(_WHAT, "batch_prices", "must map each model to its prices per million tokens")
    return extra
