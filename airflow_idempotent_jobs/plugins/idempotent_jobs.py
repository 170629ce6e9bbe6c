"""`IdempotentJobsPlugin`: what the provider adds to Airflow's api-server and navigation.

Registered through the provider info's ``plugins`` (the package's ``apache_airflow_provider``
entry point), so installing the package is enough: nothing is copied into a plugins folder.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from ..links.episode import PAGE_ROUTE, URL_PREFIX

__all__ = ["IdempotentJobsPlugin"]

NAME = "idempotent_jobs"


def _base_path() -> str:
    """The path of ``[api] base_url`` (``/airflow`` behind a proxy), so the menu link works there too."""
    from urllib.parse import urlsplit

    from ..config import api_base_url

    return urlsplit(api_base_url()).path.rstrip("/")


def _fastapi_apps() -> list[dict[str, Any]]:
    from .page_app import create_app

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Idempotent Jobs"}]


class IdempotentJobsPlugin(AirflowPlugin):
    """The "Idempotent Jobs" page (a FastAPI app the api-server mounts) and its navigation entry.

    The page opens inside Airflow's UI (``url_route``: Airflow shows ``href`` in a frame under
    ``/plugin/idempotent-jobs``), in the Browse menu.
    """

    name = NAME
    # AirflowPlugin declares these as plain class attributes (lists), read but never mutated here.
    fastapi_apps = _fastapi_apps()
    external_views = [  # noqa: RUF012
        {
            "name": "Idempotent Jobs",
            "href": f"{_base_path()}{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": PAGE_ROUTE,
        }
    ]
