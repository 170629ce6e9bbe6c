"""The "Episode" button on a task instance: opens the plugin's episode view for that task's episode.

Airflow 3 computes extra links in the worker when the task finishes and stores them in XCom, so
`EpisodeLink.get_link` runs there: it may read this task's XCom but never the metadata database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

__all__ = ["PAGE_ROUTE", "URL_PREFIX", "EpisodeLink", "episode_id_from", "episode_url"]

#: Where the api-server mounts the plugin's app (`plugins.idempotent_jobs`).
URL_PREFIX = "/idempotent-jobs"
#: The page's route in Airflow's UI (the external view's ``url_route``): ``/plugin/idempotent-jobs``.
PAGE_ROUTE = "idempotent-jobs"


def episode_url(episode_id: str, base_url: str = "", *, framed: bool = False) -> str:
    """The episode view's URL under Airflow's ``[api] base_url`` (a relative path without one);
    ``framed``: the same view inside Airflow's UI, its navigation around it."""
    path = f"{URL_PREFIX}/episodes/{quote(episode_id, safe='')}"
    return f"{base_url.rstrip('/')}{f'/plugin/{PAGE_ROUTE}' if framed else ''}{path}"


def episode_id_from(*candidates: Any) -> str | None:
    """The first candidate that is an episode id or a mapping holding one as ``episode_id``."""
    from ..identity import EpisodeId

    for value in candidates:
        if isinstance(value, dict):
            value = value.get("episode_id")
        if not isinstance(value, str):
            continue
        try:
            return str(EpisodeId.parse(value))
        except ValueError:
            continue
    return None


class EpisodeLink(BaseOperatorLink):
    """The episode this task allocated, loaded, gated or paid for.

    Allocate returns the id; the paid step and approve return a mapping with ``episode_id`` and
    carry it rendered as their ``episode_id`` argument, which also covers a failed try (no return value).
    """

    name = "Episode"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.bases.xcom import BaseXCom

        from ..config import api_base_url

        rendered = getattr(operator, "episode_id", None)
        episode_id = episode_id_from(rendered)
        if episode_id is None:
            returned = BaseXCom.get_one(
                key="return_value",
                dag_id=ti_key.dag_id,
                task_id=ti_key.task_id,
                run_id=ti_key.run_id,
                map_index=ti_key.map_index,
            )
            episode_id = episode_id_from(returned)
        if episode_id is None:
            return ""
        from ..airflow_compat import plugin_frame_follows_paths

        return episode_url(episode_id, api_base_url(), framed=plugin_frame_follows_paths())
