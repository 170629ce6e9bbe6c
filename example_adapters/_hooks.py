"""The example adapters' hooks: a generic ``http`` Connection becomes a provider.

Use with ``PaidGenerationOperator(provider_hook="example_adapters.prediction_style.PredictionStyleHook",
provider_conn_id=...)`` (or ``...batch_style.BatchStyleHook``). Connection fields, as Airflow's
``http`` type has them: host (a base URL, or a host name with the scheme in ``schema``, ``https``
by default), port, password (the API token); extra, all optional: ``lookup`` (``false`` for an API
without the listing by metadata: capability (c)), ``read_timeout``, ``connect_timeout``,
``auth_scheme`` (default ``Bearer``; empty for a bare token). Anything else in the extra, or a value
that means nothing, is `InvalidConfiguration` naming the field: the task fails before anything is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.hooks.paid_provider import PaidProviderHook

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from .batch_style import BatchStyleProvider
    from .prediction_style import PredictionStyleProvider

__all__ = ["BatchStyleHook", "PredictionStyleHook"]

_FLAGS: Final = {"true": True, "1": True, "false": False, "0": False}
_EXTRAS: Final = frozenset({"lookup", "read_timeout", "connect_timeout", "auth_scheme"})
#: A job id no API issues: its status call checks reachability and credentials, nothing else.
PROBE_REF: Final = "idempotent-jobs-connection-test"


class _ApiHook(PaidProviderHook):
    """What both hooks share: the Connection read into ``(base_url, api_token, options)``."""

    what = "API connection"

    def _settings(self) -> tuple[str, str, dict[str, Any]]:
        conn = self.get_connection(self.provider_conn_id)
        extra = conn.extra_dejson
        unknown = sorted(set(extra) - _EXTRAS)
        if unknown:
            raise InvalidConfiguration(self.what, "extra", f"unknown keys {unknown} (known: {sorted(_EXTRAS)})")
        if not conn.password:
            raise InvalidConfiguration(
                self.what, "password", f"connection {conn.conn_id!r} has none: set the API token"
            )
        options: dict[str, Any] = {"lookup": _flag(self.what, extra, "lookup", True)}
        for name in ("read_timeout", "connect_timeout"):
            if name in extra:
                options[name] = _seconds(self.what, extra, name)
        if "auth_scheme" in extra:
            options["auth_scheme"] = extra["auth_scheme"]
        return _base_url(self.what, conn), conn.password, options

    def _masked(self, provider: Any) -> Any:
        """Register every form of the token with Airflow's secrets masker (Airflow masks only the bare password)."""
        try:
            from airflow.sdk.log import mask_secret
        except ImportError:  # Airflow < 3.1
            from airflow.sdk.execution_time.secrets_masker import mask_secret  # type: ignore[no-redef,unused-ignore]
        for form in provider.secret_forms:
            mask_secret(form)
        return provider

    def _built(self, build: Any) -> Any:
        base_url, token, options = self._settings()
        try:
            provider = build(base_url, token, **options)
        except InvalidConfiguration as exc:
            field = "password" if exc.field == "api_token" else exc.field  # as the Connection's author knows it
            raise InvalidConfiguration(self.what, field, exc.reason) from None
        self.log.info("Paid provider from connection %r: %r", self.provider_conn_id, provider)
        return self._masked(provider)

    def test_connection(self) -> tuple[bool, str]:
        """Ask for a job that cannot exist: a 404 proves the API answers and accepts the token; nothing is created."""
        from airflow_idempotent_jobs.paid import ProviderError

        try:
            provider: Any = self.get_provider()
            provider.status(PROBE_REF)
        except ProviderError as exc:
            if exc.status == 404:
                return True, f"API reachable at {provider.base_url}; token accepted"
            return False, str(exc)
        except Exception as exc:  # report any failure to the UI rather than raise
            return False, f"{type(exc).__name__}: {exc}"
        return False, f"the API answered a status for {PROBE_REF!r}, a job no API issues: is this the right base URL?"


class PredictionStyleHook(_ApiHook):
    """Builds a `PredictionStyleProvider` from a generic ``http`` Connection."""

    default_conn_name = "prediction_style_default"
    hook_name = "Prediction-style API"
    what = "prediction-style connection"

    def get_provider(self) -> PredictionStyleProvider:
        from .prediction_style import PredictionStyleProvider

        provider: PredictionStyleProvider = self._built(PredictionStyleProvider)
        return provider


class BatchStyleHook(_ApiHook):
    """Builds a `BatchStyleProvider` from a generic ``http`` Connection."""

    default_conn_name = "batch_style_default"
    hook_name = "Batch-style API"
    what = "batch-style connection"

    def get_provider(self) -> BatchStyleProvider:
        from .batch_style import BatchStyleProvider

        provider: BatchStyleProvider = self._built(BatchStyleProvider)
        return provider


def _base_url(what: str, conn: Connection) -> str:
    host = (conn.host or "").strip()
    if not host:
        raise InvalidConfiguration(what, "host", f"connection {conn.conn_id!r} has none: set the API's base URL")
    if "://" not in host:
        host = f"{(conn.schema or 'https').strip()}://{host}"
    parts = urlsplit(host)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidConfiguration(what, "host", "must be an http:// or https:// URL or a host name")
    try:
        port = parts.port
    except ValueError:
        raise InvalidConfiguration(what, "host", "has an invalid port") from None
    netloc = parts.netloc
    if conn.port:
        if port is not None and port != conn.port:
            raise InvalidConfiguration(what, "port", f"{conn.port} contradicts the port in the host ({port})")
        netloc = f"{netloc}:{conn.port}" if port is None else netloc
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _flag(what: str, extra: Mapping[str, Any], name: str, default: bool) -> bool:
    value = extra.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _FLAGS:
        return _FLAGS[value.strip().lower()]
    raise InvalidConfiguration(what, name, "must be true or false")


def _seconds(what: str, extra: Mapping[str, Any], name: str) -> float:
    value = extra[name]
    try:
        seconds = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidConfiguration(what, name, "must be a number of seconds > 0")
    return seconds
