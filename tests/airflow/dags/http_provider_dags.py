"""Test DAGs of the HTTP provider: a token echoed in every error answer, and connections given as URIs.

Run by ``test_http_provider_runs.py`` (``http_provider_scenarios.py``). The paid tasks record every
exception text and trigger event they see, so the test can search them for the token.
"""

from __future__ import annotations

import traceback
from typing import Any

from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from tests.airflow.support import manual_dag, observe, store_for

FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.05, "poll_max_delay": 0.2, "poll_timeout": 60}
#: Connections whose values are wrong in one field each (``AIRFLOW_CONN_IJH_BAD_<FIELD>``).
BAD_FIELDS = ("tokens_honoured", "read_timeout", "headers", "base_url", "lookup_path", "idempotency_header")


class ObservedPaid(PaidGenerationOperator):
    """Records every exception (text and traceback) and every trigger event, then behaves as usual."""

    def execute(self, context: Any) -> dict[str, Any]:
        try:
            return super().execute(context)
        except BaseException as exc:
            if type(exc).__name__ != "TaskDeferred":
                observe("raised", context, error=_texts(exc))
            raise

    def execute_complete(self, context: Any, event: Any = None) -> dict[str, Any]:
        observe("event", context, event=event)
        try:
            return super().execute_complete(context, event)
        except BaseException as exc:
            if type(exc).__name__ != "TaskDeferred":
                observe("raised", context, error=_texts(exc))
            raise


def _texts(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "text": str(exc), "traceback": "".join(traceback.format_exception(exc))}


def _paid_dag(dag_id: str, conn_id: str, *, deferrable: bool, retries: int, fail: bool = True) -> None:
    with DAG(dag_id, **manual_dag(retries=retries)):
        AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id)) >> ObservedPaid(
            task_id="generate",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id=conn_id,
            request={"prompt": "weekly video", "fail": fail},
            store=store_for(dag_id),
            deferrable=deferrable,
            **FAST_POLL,
        )


# The echoing server: its answers repeat the token (ijh_echo) or the wrong token (ijh_echo_wrong).
_paid_dag("ijh_secret_worker", "ijh_echo", deferrable=False, retries=2)
_paid_dag("ijh_secret_deferred", "ijh_echo", deferrable=True, retries=2)
_paid_dag("ijh_secret_wrong_token", "ijh_echo_wrong", deferrable=False, retries=2)
# A URI connection saying tokens_honoured=false, to a server that ignores tokens and loses an answer.
_paid_dag("ijh_uri_lost_answer", "ijh_uri_plain", deferrable=False, retries=3, fail=False)

with DAG("ijh_uri_bad_values", **manual_dag(retries=3)):
    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijh_uri_bad_values"))
    for field in BAD_FIELDS:
        allocate >> ObservedPaid(
            task_id=f"bad_{field}",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id=f"ijh_bad_{field}",
            request={"prompt": "never sent"},
            store=store_for("ijh_uri_bad_values"),
            **FAST_POLL,
        )
