"""DAGs that read an existing episode or a week from a PostgreSQL store (test_store_readers_runs.py).

Each DAG names its own ``postgres`` Connection (``AIRFLOW_CONN_IJR_*``, one database each, prepared
by the test: empty, at an older schema, or current); every task is retried three times at once,
so a failure on try 1 is a failure without retry. Each task records why it failed.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import ApproveEpisodeOperator, CheckEpisodesOperator, PaidGenerationOperator
from tests.airflow.support import manual_dag, observe


def record_failure(context: Any) -> None:
    exc = context.get("exception")
    observe("failed", context, error=type(exc).__name__, message=str(exc))


ARGS = manual_dag(retries=3)
ARGS["default_args"] = {**ARGS["default_args"], "on_failure_callback": record_failure}

# The checker: a week (which it lists) and named episodes, on an empty database, an older schema, a current one.
for name in ("missing", "older", "current"):
    with DAG(f"ijr_check_{name}", **ARGS):
        CheckEpisodesOperator(task_id="check_week", week="2026-W32", store_conn_id=f"ijr_check_{name}")
        CheckEpisodesOperator(task_id="check_ids", episode_ids="2026-W32-0", store_conn_id=f"ijr_check_{name}")

# The approval gate: no store at all, and an older schema whose episode is already approved.
for name in ("missing", "older"):
    with DAG(f"ijr_approve_{name}", **ARGS):
        ApproveEpisodeOperator(task_id="approve", episode_id="2026-W32-0", store_conn_id=f"ijr_approve_{name}")

# The paid step on no store: the episode does not exist; nothing is created, no provider is looked up.
with DAG("ijr_paid_missing", **ARGS):
    PaidGenerationOperator(
        task_id="generate",
        episode_id="2026-W32-0",
        provider_conn_id="ijr_no_such_provider",
        request={"prompt": "never sent"},
        store_conn_id="ijr_paid_missing",
    )
