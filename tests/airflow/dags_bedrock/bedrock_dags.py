"""DAGs for Bedrock in real Airflow (run by tests/airflow/bedrock_scenarios.py).

Every paid task of ours names only an ``aws`` connection (the amazon provider's type): the operator
picks our hook for it (no ``provider_hook=``). Async invoke, deferrable and not: ``one`` (an
episode, its invocation, a step reading what was recorded), ``lost`` (as ``one``, for another
fault), ``three`` (three episodes of one run, mapped) and ``kill`` (the runner SIGKILLs the process
while the double holds the answer). Then refusals before anything is sent (``refused``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from tests.airflow.reporting import ReportingPaid, allocate_pay_report
from tests.airflow.support import START, store_for
from tests.vendors.bedrock.batch_support import JOB
from tests.vendors.bedrock.batch_support import PRICES as PRICES_PER_TOKEN

MODEL = "amazon.nova-reel-v1:0"
#: As the connection's extra ``bedrock_prices`` holds them (the example DAG's model too).
PRICES: dict[str, dict[str, float]] = {MODEL: {"per_second": 0.08}}
SECONDS = 6


def video_request(*, model: str = MODEL, seconds: Any = SECONDS) -> dict[str, Any]:
    """StartAsyncInvoke's parameters for a short Nova Reel video (``seconds=None``: unpriceable, refused)."""
    config = {"fps": 24, "dimension": "1280x720", **({} if seconds is None else {"durationSeconds": seconds})}
    return {
        "modelId": model,
        "modelInput": {
            "taskType": "TEXT_VIDEO",
            "textToVideoParams": {"text": "a lighthouse at dawn"},
            "videoGenerationConfig": config,
        },
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://weekly-media/tests/"}},
    }


def dag_args(retries: int) -> dict[str, Any]:
    return {
        "schedule": None,
        "start_date": START,
        "catchup": False,
        "default_args": {"retries": retries, "retry_delay": dt.timedelta(seconds=0)},
    }


FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.2, "poll_max_delay": 0.5, "poll_timeout": 120}

for deferrable in (False, True):
    mode = "deferred" if deferrable else "worker"
    for shape in ("one", "lost", "kill"):
        dag_id = f"ijb_{mode}_{shape}"
        with DAG(dag_id, **dag_args(4)):
            allocate_pay_report(
                dag_id,
                provider_conn_id="aws_default",
                request=video_request(),
                deferrable=deferrable,
                weekly_budget=5.0,  # the price (no estimated_cost given) is well under it
                **FAST_POLL,
            )

    dag_id = f"ijb_{mode}_three"
    with DAG(dag_id, **dag_args(4)):
        episodes = AllocateEpisodeOperator.partial(task_id="allocate", store=store_for(dag_id)).expand(
            fingerprint=["first", "second", "third"]
        )
        ReportingPaid.partial(
            task_id="pay",
            provider_conn_id="aws_default",
            request=video_request(),
            store=store_for(dag_id),
            deferrable=deferrable,
            **FAST_POLL,
        ).expand(episode_id=episodes.output)

# Refused on try 1 of 5, before anything is sent: a model without a price, a video without a
# duration (its price is unknown), a price over the week's budget.
with DAG("ijb_refused", **dag_args(4)):
    for task_id, request, budget in (
        ("unpriced", video_request(model="amazon.no-such-model"), None),
        ("unpriceable", video_request(seconds=None), 5.0),
        ("over_budget", video_request(), 0.01),
    ):
        AllocateEpisodeOperator(task_id=f"allocate_{task_id}", store=store_for("ijb_refused")) >> ReportingPaid(
            task_id=task_id,
            episode_id=f"{{{{ ti.xcom_pull(task_ids='allocate_{task_id}') }}}}",
            provider_conn_id="aws_default",
            request=request,
            store=store_for("ijb_refused"),
            weekly_budget=budget,
            **FAST_POLL,
        )

# -- Side by side: Airflow's own BedrockBatchInferenceOperator and ours, on ONE aws connection ------
# (``aws_batch``: the control-plane double; Airflow's hook ignores the extras only ours reads).
# Retries 3 (no delay) each; the runner runs them under the same faults and counts the jobs made.
#: The batch provider tests' job and batch prices (per million tokens): one CreateModelInvocationJob.
BATCH_JOB, BATCH_PRICES = JOB, PRICES_PER_TOKEN
BATCH_MODEL = JOB["modelId"]


def _side_by_side() -> None:
    from airflow.providers.amazon.aws.operators.bedrock import BedrockBatchInferenceOperator

    with DAG("sbs_bedrock_airflow", **dag_args(3)):
        BedrockBatchInferenceOperator(
            task_id="pay",
            job_name="weekly-{{ ds_nodash }}",  # one name per run, as the operator's docs show
            role_arn=BATCH_JOB["roleArn"],
            model_id=BATCH_MODEL,
            input_uri=BATCH_JOB["inputDataConfig"]["s3InputDataConfig"]["s3Uri"],
            output_uri=BATCH_JOB["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"],
            aws_conn_id="aws_batch",
            wait_for_completion=True,
            waiter_delay=1,
            waiter_max_attempts=20,
        )

    with DAG("sbs_bedrock_ours", **dag_args(3)):
        AllocateEpisodeOperator(task_id="allocate", store=store_for("sbs_bedrock_ours")) >> ReportingPaid(
            task_id="pay",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id="aws_batch",
            request=BATCH_JOB,
            estimated_cost=1.0,  # a batch's records are in S3: nothing in the request bounds its cost
            store=store_for("sbs_bedrock_ours"),
            **FAST_POLL,
        )


_side_by_side()
