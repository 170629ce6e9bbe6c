"""DAGs for the rule that ``request=`` must be a JSON object (run by tests/airflow/request_scenarios.py).

Every paid task has an episode of its own (allocated by the runner before the runs: ``2026-W32-<n>``),
two retries, a store named by a Connection and a provider Connection: a request that is not a dict
must fail the first try, before either Connection is read.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import PaidGenerationOperator
from tests.airflow.support import observe, store_for

RETRY_2: dict[str, Any] = {"retries": 2, "retry_delay": dt.timedelta(0)}
START = pendulum.datetime(2026, 1, 1, tz="UTC")
PARAMS = {"req": {"prompt": "a lighthouse at dusk"}}
#: Tasks of ijr_refused: the request each gives (omitted: none at all).
REFUSED: dict[str, Any] = {
    "text_template": "{{ params.req }}",  # renders the dict's text: not native
    "json_text": '{"prompt": "a lighthouse at dusk"}',
    "none": None,
    "omitted": ...,
    "pairs": [["prompt", "a lighthouse at dusk"]],  # dict() would have made this a request
    "a_list": ["a lighthouse at dusk"],
    "a_number": 7,
    "a_bool": True,
}
#: The first episode sequence of each DAG's tasks (the runner allocates 2026-W32-0 .. -19).
NATIVE_FIRST, OK_FIRST, DECORATED_FIRST = 10, 12, 14


class ReportingPaid(PaidGenerationOperator):
    """Records how ``execute`` ended (the exception's class and message), then re-raises."""

    def execute(self, context: Any) -> Any:
        try:
            return super().execute(context)
        except Exception as exc:
            observe("failed", context, error=type(exc).__name__, message=str(exc))
            raise


def paid(task_id: str, sequence: int, **kwargs: Any) -> ReportingPaid:
    return ReportingPaid(
        task_id=task_id,
        episode_id=f"2026-W32-{sequence}",
        provider_conn_id="ijr_provider",
        store_conn_id="ijr_store",
        **kwargs,
    )


with DAG("ijr_refused", schedule=None, start_date=START, default_args=RETRY_2, params=PARAMS):
    for n, (name, request) in enumerate(REFUSED.items()):
        paid(name, n, **({} if request is ... else {"request": request}))

with DAG(
    "ijr_native_refused",
    schedule=None,
    start_date=START,
    default_args=RETRY_2,
    params=PARAMS,
    render_template_as_native_obj=True,
):
    paid("native_none", NATIVE_FIRST, request="{{ dag_run.conf.get('req') }}")  # no conf: None
    paid("native_text", NATIVE_FIRST + 1, request="{{ params.req.prompt }}")

# The positive control: rendered natively, the same template is the dict, and it is paid for.
with DAG(
    "ijr_native_ok",
    schedule=None,
    start_date=START,
    default_args=RETRY_2,
    params=PARAMS,
    render_template_as_native_obj=True,
):
    paid("native_dict", OK_FIRST, request="{{ params.req }}")
    paid("empty", OK_FIRST + 1, request={})  # an empty request is given as {}

# @task.paid_generation: the function's return value obeys the same rule (checked once the
# episode is loaded, before the provider's Connection is read). The store is named by path.
with DAG("ijr_decorated", schedule=None, start_date=START, default_args=RETRY_2):
    common: dict[str, Any] = {"provider_conn_id": "ijr_provider", "store": store_for("ijr")}

    @task.paid_generation(episode_id=f"2026-W32-{DECORATED_FIRST}", **common)
    def returns_text() -> Any:
        return '{"prompt": "a lighthouse at dusk"}'

    @task.paid_generation(episode_id=f"2026-W32-{DECORATED_FIRST + 1}", **common)
    def returns_none() -> Any:
        return None

    @task.paid_generation(episode_id=f"2026-W32-{DECORATED_FIRST + 2}", **common)
    def returns_pairs() -> Any:
        return [["prompt", "a lighthouse at dusk"]]

    returns_text()
    returns_none()
    returns_pairs()
