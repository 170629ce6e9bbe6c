"""What Airflow's providers manager learns about this package (``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from typing import Any

__all__ = ["get_provider_info"]

_INTEGRATION = "Idempotent Jobs"


def get_provider_info() -> dict[str, Any]:
    """The provider description; valid against Airflow's ``provider_info.schema.json``.

    ``package-name`` must equal the distribution name: the providers manager checks it.
    """
    from ._version import __version__
    from .config import config_description
    from .hooks._store_form import STORE_FORM
    from .hooks._ui import HTTP_PROVIDER_FIELDS, as_provider_info
    from .vendors.replicate import _form as replicate_form

    return {
        "package-name": "airflow-idempotent-jobs",
        "name": _INTEGRATION,
        "description": (
            "Exactly one job per scheduled invocation and at most one paid submission per job: "
            "weekly episode allocation that survives Airflow retries, clears and backfills."
        ),
        "versions": [__version__],
        "integrations": [{"integration-name": _INTEGRATION, "tags": ["software"]}],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_idempotent_jobs.operators.allocate",
                    "airflow_idempotent_jobs.operators.approve",
                    "airflow_idempotent_jobs.operators.check_episodes",
                    "airflow_idempotent_jobs.operators.effect",
                    "airflow_idempotent_jobs.operators.paid_generation",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_idempotent_jobs.hooks.store",
                    "airflow_idempotent_jobs.hooks.http_provider",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_idempotent_jobs.triggers.paid_job"],
            }
        ],
        # Read by Airflow's providers manager as name + "class-name" (the schema's items say "path",
        # but they are not checked and the loader reads "class-name"): ``@task.<name>``.
        "task-decorators": [
            {"name": "paid_generation", "class-name": "airflow_idempotent_jobs.decorators.paid_generation_task"},
            {"name": "episode", "class-name": "airflow_idempotent_jobs.decorators.episode_task"},
        ],
        "connection-types": [
            {
                "connection-type": "idempotent_jobs_store",
                "hook-class-name": "airflow_idempotent_jobs.hooks.store.EpisodeStoreHook",
                "hook-name": "Idempotent Jobs Store",
                "ui-field-behaviour": as_provider_info(STORE_FORM),
            },
            {
                "connection-type": "idempotent_jobs_http",
                "hook-class-name": "airflow_idempotent_jobs.hooks.http_provider.HttpPaidProviderHook",
                "hook-name": "Idempotent Jobs HTTP Provider",
                "ui-field-behaviour": as_provider_info(HTTP_PROVIDER_FIELDS),
            },
            # Replicate has no Airflow provider of its own: its connection type is ours.
            {
                "connection-type": replicate_form.CONN_TYPE,
                "hook-class-name": replicate_form.HOOK_CLASS,
                "hook-name": replicate_form.HOOK_NAME,
                "ui-field-behaviour": as_provider_info(replicate_form.REPLICATE_FIELDS),
            },
        ],
        "config": config_description(),
        # The "Idempotent Jobs" page: a FastAPI app the api-server mounts, and its navigation entry.
        "plugins": [
            {
                "name": "idempotent_jobs",
                "plugin-class": "airflow_idempotent_jobs.plugins.idempotent_jobs.IdempotentJobsPlugin",
            }
        ],
        # The "Episode" button on task instances (also set as the operators' operator_extra_links).
        "extra-links": ["airflow_idempotent_jobs.links.episode.EpisodeLink"],
    }
