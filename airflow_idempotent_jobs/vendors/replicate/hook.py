"""`ReplicateHook`: the Replicate provider from an ``idempotent_jobs_replicate`` connection.

Replicate has no Airflow provider, so the connection type is ours (registered in provider info:
``resolve_provider_hook`` finds this hook for it). Fields: password = API token (required; the
environment is not read), host = base URL (default https://api.replicate.com; ``https://`` is
added to a bare host name, a trailing ``/v1`` is dropped since the SDK adds it), extra = ``prices``
(per model or version; the hook's ``prices=`` wins) and optionally ``timeout``, ``token_input``
(null: no lookup, capability (c)), ``clock_skew``, ``max_pages``. Anything else in the extra is
refused (`InvalidConfiguration`, one line naming the field), before anything is sent. The SDK is
imported when the provider is built, so Airflow can list this hook without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from ...errors import InvalidConfiguration
from ...hooks.paid_provider import PaidProviderHook
from .._airflow import mask_key
from ._form import CONN_TYPE, DEFAULT_BASE_URL, HOOK_NAME, REPLICATE_FIELDS

if TYPE_CHECKING:
    from .provider import ReplicatePredictionProvider

__all__ = ["ReplicateHook"]

_WHAT: Final = "replicate connection"
_OPTIONS: Final = ("timeout", "token_input", "clock_skew", "max_pages")


class ReplicateHook(PaidProviderHook):
    """Builds `ReplicatePredictionProvider` from an ``idempotent_jobs_replicate`` Connection (module docstring)."""

    default_conn_name = "replicate_default"
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(self, provider_conn_id: str | None = None, *, prices: Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(provider_conn_id, **kwargs)
        self.prices = prices

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from ...hooks._ui import field_behaviour

        return field_behaviour(REPLICATE_FIELDS)

    def get_provider(self) -> ReplicatePredictionProvider:
        conn = self.get_connection(self.provider_conn_id)
        extra = conn.extra_dejson
        unknown = sorted(str(key) for key in extra if key not in ("prices", *_OPTIONS))
        if unknown:
            raise InvalidConfiguration(_WHAT, unknown[0], f"is not a setting (known: prices, {', '.join(_OPTIONS)})")
        token = conn.password
        if not isinstance(token, str) or not token.strip():
            raise InvalidConfiguration(_WHAT, "password", "set the API token (the environment is not read)")
        prices = self.prices if self.prices is not None else extra.get("prices")
        if prices is None:
            raise InvalidConfiguration(_WHAT, "prices", "set each model's price per second (extra or prices=)")
        mask_key(token)
        try:
            from .provider import ReplicatePredictionProvider
        except ImportError as exc:
            raise InvalidConfiguration(
                _WHAT, "provider", f"the replicate SDK cannot be imported ({exc}): install replicate>=1.0.7,<2"
            ) from None
        options = {name: extra[name] for name in _OPTIONS if name in extra}
        return ReplicatePredictionProvider(
            api_token=token, prices=prices, base_url=_base_url(conn.host, conn.port), **options
        )


def _base_url(host: str | None, port: int | None) -> str:
    """The connection's host as a URL: ``https://`` for a bare host name, its port when the host names none."""
    if not host:
        return DEFAULT_BASE_URL
    parts = urlsplit(host if "://" in host else f"https://{host}")
    netloc = parts.netloc if not port or parts.port is not None else f"{parts.netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
