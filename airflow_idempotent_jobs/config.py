"""The provider's ``[idempotent_jobs]`` Airflow configuration section: its description and its reader.

The description (`OPTIONS`) goes into the provider info (``config``), so Airflow documents the
options, lists them in ``airflow config list`` and accepts ``AIRFLOW__IDEMPOTENT_JOBS__<OPTION>``
(and, for the sensitive ``store``, ``..._SECRET`` and ``..._CMD``). The operators and the plugin
read them with `setting`, through Airflow's configuration API (the Task SDK's parser on Airflow
>= 3.1), never the metadata database; only `setting` refuses an option not described here.
Airflow is imported only when a value is read: the providers manager imports this module.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["OPTIONS", "SECTION", "airflow_conf", "api_base_url", "config_description", "env_name", "setting"]

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
            "own weekly_budget= argument is what refuses a submission.\n"
        ),
        "version_added": "0.1.0",
        "type": "float",
        "example": "250.0",
        "default": "",
    },
    "currency": {
        "description": (
            "The unit the Idempotent Jobs page shows costs and budgets in (a code or symbol: no spaces, "
            "at most 12 characters). Display only: costs are stored as the provider reports them. "
            "Unset: no unit is shown.\n"
        ),
        "version_added": "0.2.0",
        "type": "string",
        "example": "USD",
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


def setting(option: str) -> str | None:
    """The option's value from Airflow's configuration, stripped; None when unset or empty."""
    if option not in OPTIONS:
        raise KeyError(option)
    value = airflow_conf().get(SECTION, option, fallback="")
    text = value.strip() if isinstance(value, str) else ""
    return text or None


def api_base_url() -> str:
    """Airflow's ``[api] base_url`` as set (empty when unset): where the browser finds the UI, the
    plugin's page and its menu link (a path such as ``/airflow`` behind a proxy)."""
    value = airflow_conf().get("api", "base_url", fallback="")
    return value.strip() if isinstance(value, str) else ""


def airflow_conf() -> Any:
    """Airflow's configuration as task code may read it."""
    try:
        from airflow.sdk import conf
    except ImportError:  # pragma: no cover - older Airflow
        from airflow.configuration import conf  # type: ignore[assignment,no-redef,unused-ignore]
    return conf
