"""Connection-form behaviour of both connection types, in one place.

Airflow >= 3.2 reads it from the provider info (``ui-field-behaviour``) without importing hooks;
older versions call each hook's ``get_ui_field_behaviour()``. Both read these dicts.
"""

from __future__ import annotations

import copy
from typing import Any, Final

__all__ = ["HTTP_PROVIDER_FIELDS", "STORE_FIELDS", "as_provider_info", "field_behaviour"]

STORE_FIELDS: Final[dict[str, Any]] = {
    "hidden_fields": ["schema", "login", "password", "port"],
    "relabeling": {"host": "Store path or URL"},
    "placeholders": {
        "host": "/var/lib/airflow/idempotent_jobs  or  file:///abs/path  or  postgresql://host/db",
        "extra": '{"path": "/var/lib/airflow/idempotent_jobs"}',
    },
}

HTTP_PROVIDER_FIELDS: Final[dict[str, Any]] = {
    "hidden_fields": ["schema", "login"],
    "relabeling": {"host": "Base URL", "password": "API token"},
    "placeholders": {
        "host": "https://api.example.com/v1",
        "password": "sent as 'Authorization: Bearer <token>'",
        "extra": '{"submit_path": "/jobs", "status_path": "/jobs/{remote_ref}", '
        '"ref_path": "id", "state_path": "state", "cost_path": "cost", '
        '"lookup_path": "/jobs?token={token}", "lookup_no_job_status": 404, '
        '"lookup_no_job_path": "error.code", "lookup_no_job_value": "no_job"}',
    },
}


def field_behaviour(fields: dict[str, Any]) -> dict[str, Any]:
    """A copy for ``get_ui_field_behaviour()`` (callers may mutate it)."""
    return copy.deepcopy(fields)


def as_provider_info(fields: dict[str, Any]) -> dict[str, Any]:
    """The provider-info spelling (kebab-case keys)."""
    return {
        "hidden-fields": list(fields["hidden_fields"]),
        "relabeling": dict(fields["relabeling"]),
        "placeholders": dict(fields["placeholders"]),
    }
