"""The provider server's switches (`ServerConfig`), and the client configuration that matches them.

`server_provider_config`, `server_connection` and `server_connection_uri` say how an
`HttpProviderConfig` or an Airflow Connection reads the server's JSON with its current
capabilities; `server` re-exports them all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import quote, urlencode

from ._api_switches import ApiSwitches

if TYPE_CHECKING:
    from ..paid.http import HttpProviderConfig

__all__ = [
    "FAULTS",
    "LOOKUP_STYLES",
    "NO_JOB_ANSWER",
    "TOKEN_HEADER",
    "ServerConfig",
    "server_connection",
    "server_connection_uri",
    "server_provider_config",
]

FAULTS: Final = frozenset({"drop_after_accept", "slow", "5xx", "5xx_after_accept", "4xx", "409_after_accept"})
TOKEN_HEADER: Final = "Idempotency-Key"
LOOKUP_STYLES: Final = frozenset({"not_found", "list"})
#: What a lookup answers when no job carries the token, per style: (status, dotted path, value);
#: None as the value means an empty list.
NO_JOB_ANSWER: Final[dict[str, tuple[int, str, str | None]]] = {
    "not_found": (404, "error.code", "no_job"),
    "list": (200, "jobs", None),
}


@dataclass
class ServerConfig(ApiSwitches):
    """Behaviour switches; all can change at run time through ``POST /_admin/config``."""

    faults: ClassVar[frozenset[str]] = FAULTS

    #: Return the existing job for a known idempotency token (capability (a)).
    honour_tokens: bool = True
    #: How a lookup answers: "not_found" (404 with error.code "no_job" when no job has the token)
    #: or "list" (200 with the list of jobs, empty when none has it). See `server_provider_config`.
    lookup_style: str = "not_found"

    def check(self, changes: dict[str, Any]) -> None:
        super().check(changes)
        if "lookup_style" in changes and changes["lookup_style"] not in LOOKUP_STYLES:
            raise ValueError(f"unknown lookup_style {changes['lookup_style']!r} (one of {sorted(LOOKUP_STYLES)})")


def server_provider_config(url: str, config: ServerConfig | None = None, **overrides: Any) -> HttpProviderConfig:
    """The `HttpProviderConfig` for a provider server at ``url`` behaving as ``config``."""
    from ..paid.http import HttpProviderConfig

    cfg = config or ServerConfig()
    values: dict[str, Any] = {
        "base_url": url,
        "idempotency_header": TOKEN_HEADER,
        "tokens_honoured": cfg.honour_tokens,
        "ref_path": "job.id",
        "state_path": "job.status",
        "cost_path": "billing.amount",
        "result_path": "output",
        "error_path": "error.message",
        "state_map": {"rendering": "running"},
        "read_timeout": 10.0,
        "connect_retries": 2,
        "backoff_initial": 0.05,
        **(_lookup_fields(cfg.lookup_style) if cfg.lookup else {}),
    }
    values.update(overrides)
    return HttpProviderConfig(**_coherent_lookup(values, overrides))


def _lookup_fields(style: str) -> dict[str, Any]:
    """The lookup URL and the declared "no job" answer of the server's lookup style."""
    status, path, value = NO_JOB_ANSWER[style]
    return {
        "lookup_path": "/jobs?token={token}",
        "lookup_ref_path": "jobs.0.id" if style == "list" else "job.id",
        "lookup_no_job_status": status,
        "lookup_no_job_path": path,
        "lookup_no_job_value": value,
    }


def _coherent_lookup(values: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Without a lookup URL (``lookup_path=None`` given), the lookup answer fields go too, unless given."""
    if values.get("lookup_path") is None:
        for name in _lookup_fields("not_found"):
            if name not in given:
                values.pop(name, None)
    return values


def server_connection(url: str, token: str, config: ServerConfig | None = None, **extra: Any) -> dict[str, Any]:
    """The fields of an ``idempotent_jobs_http`` Connection to the server at ``url`` (for ``AIRFLOW_CONN_*``).

    The host carries the base URL, the password the token, the extra the rest of the provider
    config, updated with ``extra`` as given (unchecked, so a test can also write a broken one).
    """
    fields = server_provider_config(url, config).to_dict()
    del fields["base_url"]
    merged = _coherent_lookup({**fields, **extra}, extra)
    return {"conn_type": "idempotent_jobs_http", "host": url, "password": token, "extra": merged}


def server_connection_uri(url: str, token: str, config: ServerConfig | None = None, **extra: Any) -> str:
    """`server_connection` as a Connection URI, where every extra is a string (as Airflow parses URIs).

    Booleans become ``true``/``false``, numbers their text, mappings JSON text; a None extra is left
    out. ``extra`` values that are strings already are written as given (unchecked).
    """
    conn = server_connection(url, token, config, **extra)
    query = {}
    for name, value in conn["extra"].items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (dict, list)):
            value = json.dumps(value)
        query[name] = str(value)
    host = quote(url, safe="")
    return f"idempotent-jobs-http://:{quote(token, safe='')}@{host}?{urlencode(query)}"
