"""A hook for the HTTP paid provider: a Connection becomes an `HttpPaidProvider`.

Connection fields: host = base URL, password = API token, extra = `HttpProviderConfig` fields plus
``auth_header`` (default ``Authorization``) and ``auth_scheme`` (default ``Bearer``; empty for a
bare token). The token goes into the provider object only: never into logs, reprs or messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from ..paid.http import HttpPaidProvider, HttpProviderConfig

__all__ = ["HttpPaidProviderHook"]

#: Extra keys the hook consumes itself; every other extra key is an `HttpProviderConfig` field.
_AUTH_KEYS = ("auth_header", "auth_scheme")
#: A remote ref no provider issues: its status call checks reachability and credentials, nothing else.
PROBE_REF = "idempotent-jobs-connection-test"


class HttpPaidProviderHook(BaseHook):
    """Builds the provider client from ``provider_conn_id``; the Connection is read on first use only."""

    conn_name_attr = "provider_conn_id"
    default_conn_name = "idempotent_jobs_http_default"
    conn_type = "idempotent_jobs_http"
    hook_name = "Idempotent Jobs HTTP Provider"

    def __init__(self, provider_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.provider_conn_id = provider_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from ._ui import HTTP_PROVIDER_FIELDS, field_behaviour

        return field_behaviour(HTTP_PROVIDER_FIELDS)

    # -- building --------------------------------------------------------------------------------
    def get_provider(self) -> HttpPaidProvider:
        conn = self.get_connection(self.provider_conn_id)
        return self._build(conn, conn.extra_dejson)

    async def aget_provider(self) -> HttpPaidProvider:
        """`get_provider` for triggers: the Connection is fetched without blocking the event loop."""
        conn = await self.aget_connection(self.provider_conn_id)
        return self._build(conn, await conn.aextra_dejson())

    def get_conn(self) -> HttpPaidProvider:
        return self.get_provider()

    def _build(self, conn: Connection, extra: Mapping[str, Any]) -> HttpPaidProvider:
        from ..paid.http import HttpPaidProvider

        config = provider_config(conn, extra)
        header = str(extra.get("auth_header") or "Authorization")
        scheme = extra.get("auth_scheme", "Bearer")
        value = None
        if conn.password:
            value = f"{scheme} {conn.password}" if scheme else conn.password
        provider = HttpPaidProvider(config, auth_header=header, auth_value=value)
        self.log.info("Paid provider from connection %r: %r", self.provider_conn_id, provider)
        return provider

    def test_connection(self) -> tuple[bool, str]:
        """Ask for the status of a job that cannot exist: 404 proves reachability and credentials."""
        from ..paid.provider import ProviderError

        try:
            provider = self.get_provider()
            provider.status(PROBE_REF)
        except ProviderError as exc:
            if exc.status == 404:
                return True, f"provider reachable at {provider.config.base_url}; credentials accepted"
            return False, str(exc)
        except Exception as exc:  # report any failure to the UI rather than raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"provider reachable at {provider.config.base_url}"


def provider_config(conn: Connection, extra: Mapping[str, Any]) -> HttpProviderConfig:
    """The `HttpProviderConfig` a Connection describes (no secret in it)."""
    from ..paid.http import HttpProviderConfig

    fields = {k: v for k, v in extra.items() if k not in _AUTH_KEYS}
    if "base_url" not in fields:
        fields["base_url"] = _base_url(conn)
    return HttpProviderConfig.from_dict(fields)


def _base_url(conn: Connection) -> str:
    host = (conn.host or "").strip()
    if not host:
        raise ValueError(f"connection {conn.conn_id!r} has no host: set it to the provider's base URL")
    url = host if "://" in host else f"https://{host}"
    if conn.port and "://" not in host:
        url += f":{conn.port}"
    return url
