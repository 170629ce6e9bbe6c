"""A hook for the HTTP paid provider: a Connection becomes an `HttpPaidProvider`.

Connection fields: host = base URL (``https://`` when it names no scheme; the port and, in a URI,
the path are added), password = API token, extra = `HttpProviderConfig` fields plus
``auth_header`` (default ``Authorization``) and ``auth_scheme`` (default ``Bearer``; empty for a
bare token). Extras may be JSON values or, from a connection URI, strings (``true/false/1/0``,
numbers, mappings as JSON text); a value that means nothing is `InvalidConfiguration` naming the
field, which fails the task without retry.

The token goes into the provider object only. Every form of it (the header value, URL-encoded,
JSON-escaped, base64, ...) is registered with Airflow's secrets masker where the Connection is
read, so task and triggerer logs hide it too; the provider redacts its own texts either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..airflow_compat import aextra_dejson, amask_secret, mask_secret
from .paid_provider import PaidProviderHook

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from ..paid.http import HttpPaidProvider, HttpProviderConfig

__all__ = ["HttpPaidProviderHook"]

#: Extra keys the hook consumes itself; every other extra key is an `HttpProviderConfig` field.
_AUTH_KEYS = ("auth_header", "auth_scheme")
_WHAT = "provider connection"
#: A remote ref no provider issues: its status call checks reachability and credentials, nothing else.
PROBE_REF = "idempotent-jobs-connection-test"


class HttpPaidProviderHook(PaidProviderHook):
    """Builds the provider client from ``provider_conn_id``; the Connection is read on first use only."""

    conn_name_attr = "provider_conn_id"
    default_conn_name = "idempotent_jobs_http_default"
    conn_type = "idempotent_jobs_http"
    hook_name = "Idempotent Jobs HTTP Provider"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from ._ui import HTTP_PROVIDER_FIELDS, field_behaviour

        return field_behaviour(HTTP_PROVIDER_FIELDS)

    # -- building --------------------------------------------------------------------------------
    def get_provider(self) -> HttpPaidProvider:
        conn = self.get_connection(self.provider_conn_id)
        provider = self._build(conn, conn.extra_dejson)
        _mask(provider)
        return provider

    async def aget_provider(self) -> HttpPaidProvider:
        """`get_provider` for triggers: the Connection is fetched without blocking the event loop."""
        conn = await self.aget_connection(self.provider_conn_id)
        provider = self._build(conn, await aextra_dejson(conn))
        await _amask(provider)
        return provider

    def get_conn(self) -> HttpPaidProvider:
        return self.get_provider()

    def _build(self, conn: Connection, extra: Mapping[str, Any]) -> HttpPaidProvider:
        from ..errors import InvalidConfiguration
        from ..paid._http_config import valid_header_name
        from ..paid.http import HttpPaidProvider

        config = provider_config(conn, extra)
        header = extra.get("auth_header", "Authorization")
        scheme = extra.get("auth_scheme", "Bearer")
        if not valid_header_name(header):
            raise InvalidConfiguration(_WHAT, "auth_header", "must be an HTTP header name")
        if not isinstance(scheme, str) or not (scheme == "" or valid_header_name(scheme)):
            raise InvalidConfiguration(_WHAT, "auth_scheme", "must be one word such as Bearer, or empty")
        value = None
        if conn.password:
            value = f"{scheme} {conn.password}" if scheme else conn.password
        try:
            provider = HttpPaidProvider(config, auth_header=header, auth_value=value)
        except InvalidConfiguration as exc:
            if exc.field == "auth_value":  # the connection's password, as far as its author knows
                raise InvalidConfiguration(_WHAT, "password", "must be printable ASCII (the API token)") from None
            raise
        self.log.info("Paid provider from connection %r: %r", self.provider_conn_id, provider)
        return provider

    def test_connection(self) -> tuple[bool, str]:
        """Ask for the status of a job that cannot exist: 404 proves reachability and credentials."""
        from ..errors import ProviderError

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
    """The host as a base URL; the port and schema (a URI's path) complete it, never contradict it."""
    from urllib.parse import urlsplit, urlunsplit

    from ..errors import InvalidConfiguration

    host = (conn.host or "").strip()
    if not host:
        raise InvalidConfiguration(_WHAT, "host", f"connection {conn.conn_id!r} has none: set the provider's base URL")
    parts = urlsplit(host if "://" in host else f"https://{host}")
    netloc, path = parts.netloc, parts.path
    try:
        port = parts.port
    except ValueError:
        raise InvalidConfiguration(_WHAT, "host", "has an invalid port") from None
    if conn.port:
        if port is not None and port != conn.port:
            raise InvalidConfiguration(_WHAT, "port", f"{conn.port} contradicts the port in the host ({port})")
        netloc = f"{netloc}:{conn.port}" if port is None else netloc
    if conn.schema:
        path = path.rstrip("/") + "/" + conn.schema.strip("/")
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


def _mask(provider: HttpPaidProvider) -> None:
    """Register every form of the token with Airflow's secrets masker (this process and its supervisor)."""
    for form in provider.secret_forms:
        mask_secret(form)


async def _amask(provider: HttpPaidProvider) -> None:
    """`_mask` from the triggerer's event loop (Airflow's async variant, where it has one, never blocks it)."""
    for form in provider.secret_forms:
        await amask_secret(form)
