"""The provider's ``[idempotent_jobs]`` Airflow configuration section: its description and its reader.

The description goes into the provider info (``config``), so Airflow documents the options, lists
them in ``airflow config list`` and accepts ``AIRFLOW__IDEMPOTENT_JOBS__<OPTION>`` (and, for the
sensitive ``store``, ``..._SECRET`` and ``..._CMD``). Task code reads the options with
`operators._settings.setting`, through Airflow's configuration API, never the metadata database.
This module is data only: it imports nothing of Airflow (the providers manager imports it).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["OPTIONS", "SECTION", "config_description", "env_name"]

SECTION: Final = "idempotent_jobs"

OPTIONS: Final[dict[str, dict[str, Any]]] = {
    "store": {
        "description": (
            "The episode store of every operator that names none (no store= and no store_conn_id=): "
            "a directory, file:// URL or postgresql:// URL. Required when the executor runs tasks on "
            "several hosts (Celery, Kubernetes, Edge, ...), where the default per-host file store "
            "under $AIRFLOW_HOME would give each worker a store of its own. Use store_conn_id to keep "
            "the password in a Connection.\n"
        ),
        "version_added": "0.1.0",
        "type": "string",
        "example": "postgresql://jobs@db.internal:5432/jobs",
        "default": "",
        "sensitive": True,
    },
    "store_conn_id": {
        "description": (
            "A Connection naming the episode store of every operator that names none "
            "(an idempotent_jobs_store or postgres Connection). Set store or store_conn_id, not both.\n"
        ),
        "version_added": "0.1.0",
        "type": "string",
        "example": "idempotent_jobs_store_default",
        "default": "",
    },
    "timezone": {
        "description": (
            "IANA time zone that ISO weeks are computed in for DAGs without a time zone of their own "
            "(no start_date, or a naive one: the DAG's zone is then [core] default_timezone). "
            "An operator's timezone= argument and a DAG's own time zone come first.\n"
        ),
        "version_added": "0.1.0",
        "type": "string",
        "example": "Europe/Berlin",
        "default": "",
    },
    "weekly_budget": {
        "description": (
            "The weekly spend the Idempotent Jobs page in Airflow's UI shows each week's spend "
            "against (a number >= 0 in the provider's currency unit). Display only: the paid step's "
            "own budget= argument is what refuses a submission.\n"
        ),
        "version_added": "0.2.0",
        "type": "float",
        "example": "250.0",
        "default": "",
    },
}


def config_description() -> dict[str, Any]:
    """The provider info's ``config`` value (validated against Airflow's provider_info schema)."""
    return {
        SECTION: {
            "description": "Deployment-wide defaults of the airflow-idempotent-jobs operators.\n",
            "options": {name: dict(option) for name, option in OPTIONS.items()},
        }
    }


def env_name(option: str) -> str:
    """The environment variable that sets ``option``: ``AIRFLOW__IDEMPOTENT_JOBS__STORE``."""
    return f"AIRFLOW__{SECTION.upper()}__{option.upper()}"
