"""The ``idempotent_jobs_replicate`` connection form, importable without Airflow or the SDK (provider info reads it)."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["CONN_TYPE", "DEFAULT_BASE_URL", "HOOK_CLASS", "HOOK_NAME", "REPLICATE_FIELDS"]

CONN_TYPE: Final = "idempotent_jobs_replicate"
#: The SDK's own default; it adds ``/v1/...`` to it.
DEFAULT_BASE_URL: Final = "https://api.replicate.com"
HOOK_CLASS: Final = "airflow_idempotent_jobs.vendors.replicate.hook.ReplicateHook"
HOOK_NAME: Final = "Replicate predictions (idempotent)"

REPLICATE_FIELDS: Final[dict[str, Any]] = {
    "hidden_fields": ["schema", "login", "port"],
    "relabeling": {"host": "Base URL", "password": "API token"},
    "placeholders": {
        "host": "https://api.replicate.com",
        "password": "r8_... (sent as 'Authorization: Bearer <token>')",
        "extra": '{"prices": {"owner/model": {"per_second": 0.000975, "max_seconds": 600}}, '
        '"timeout": 30, "token_input": "idempotency_token", "clock_skew": 300, "max_pages": 20}',
    },
}
