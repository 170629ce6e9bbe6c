"""Reading the provider's ``[idempotent_jobs]`` options (and Airflow's own) from task code.

Through Airflow's configuration API (the Task SDK's parser on Airflow >= 3.1), never the metadata
database. The options themselves are described in `provider_config`.
"""

from __future__ import annotations

from typing import Any

from ..provider_config import OPTIONS, SECTION

__all__ = ["airflow_conf", "setting"]


def setting(option: str) -> str | None:
    """The option's value from Airflow's configuration, stripped; None when unset or empty."""
    if option not in OPTIONS:
        raise KeyError(option)
    value = airflow_conf().get(SECTION, option, fallback="")
    text = value.strip() if isinstance(value, str) else ""
    return text or None


def airflow_conf() -> Any:
    """Airflow's configuration as task code may read it."""
    try:
        from airflow.sdk import conf
    except ImportError:  # pragma: no cover - older Airflow
        from airflow.configuration import conf  # type: ignore[assignment,no-redef,unused-ignore]
    return conf
