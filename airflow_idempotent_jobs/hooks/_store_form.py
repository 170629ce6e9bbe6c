"""The ``idempotent_jobs_store`` connection form (read by ``get_provider_info`` without importing hooks).

Login and password are fields of their own: a PostgreSQL password belongs in the password field,
which Airflow encrypts and never shows, not in the host, which the UI lists in plain text.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["STORE_FORM"]

STORE_FORM: Final[dict[str, Any]] = {
    "hidden_fields": [],
    "relabeling": {"host": "Store path or URL", "schema": "Database (PostgreSQL)"},
    "placeholders": {
        "host": "/var/lib/airflow/idempotent_jobs  or  file:///abs/path  or  postgresql://db.internal:5432/jobs",
        "login": "PostgreSQL user (a PostgreSQL store only)",
        "password": "PostgreSQL password (never in the host or extra)",
        "port": "5432 (when the URL has no port)",
        "schema": "jobs (when the URL has no database)",
        "extra": '{"path": "/var/lib/airflow/idempotent_jobs"}',
    },
}
