"""DAGs for the LLM batch providers in real Airflow (run by tests/airflow/llm_batch_scenarios.py).

Every paid task names only ``openai_default`` or ``anthropic_default``, connections of the vendors'
own types: the operator picks our hook for them (no ``provider_hook=``). For each vendor, deferrable
and not: ``one`` (an episode, its batch, a step reading what was recorded), ``three`` (three
episodes of one run, mapped) and ``kill`` (the runner SIGKILLs the process while the create
answer is held). Then refusals before anything is sent (``bad``, ``budget``) and, for OpenAI, a
prepared JSONL file (``file``).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from airflow_idempotent_jobs.vendors.openai import prepare_request
from tests.airflow.reporting import ReportingPaid
from tests.airflow.support import START, observe, report_paid, store_for

OPENAI_MODEL = "gpt-test-mini"
ANTHROPIC_MODEL = "claude-test-haiku"
#: Batch prices per million tokens, as the connections' extra ``batch_prices`` holds them (with the
#: example DAGs' models, as their docstrings say).
PRICES: dict[str, dict[str, dict[str, float]]] = {
    "openai": {
        OPENAI_MODEL: {"input": 0.125, "output": 1.0, "cached_input": 0.0125},
        "gpt-5-mini": {"input": 0.125, "output": 1.0, "cached_input": 0.0125},
    },
    "anthropic": {
        ANTHROPIC_MODEL: {"input": 0.5, "output": 2.5, "cached_input": 0.05, "cache_write": 0.625},
        "claude-haiku-4-5": {"input": 0.5, "output": 2.5, "cached_input": 0.05, "cache_write": 0.625},
    },
}
QUESTIONS = ("why is the sky blue", "what is a lighthouse for", "how do tides work")


def batch_request(vendor: str, *, model: str | None = None, max_tokens: int | None = 64) -> dict[str, Any]:
    """Three questions as the vendor's batch request (``max_tokens=None``: unbounded, refused)."""
    if vendor == "openai":
        bound = {} if max_tokens is None else {"max_completion_tokens": max_tokens}
        return {
            "endpoint": "/v1/chat/completions",
            "requests": [
                {
                    "custom_id": f"q{i}",
                    "body": {"model": model or OPENAI_MODEL, "messages": [{"role": "user", "content": q}], **bound},
                }
                for i, q in enumerate(QUESTIONS)
            ],
        }
    return {
        "requests": [
            {
                "custom_id": f"q{i}",
                "params": {
                    "model": model or ANTHROPIC_MODEL,
                    "max_tokens": max_tokens,
                    "system": "answer in one short sentence",
                    "messages": [{"role": "user", "content": q}],
                },
            }
            for i, q in enumerate(QUESTIONS)
        ]
    }


def dag_args(retries: int, delay: float) -> dict[str, Any]:
    return {
        "schedule": None,
        "start_date": START,
        "catchup": False,
        "default_args": {"retries": retries, "retry_delay": dt.timedelta(seconds=delay)},
    }


#: Anthropic's lookup settles only once every candidate batch has ended (its double ends them
#: after a few seconds): its retries wait a little and there are more of them.
RETRIES = {"openai": (4, 0.0), "anthropic": (12, 0.5)}
FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.2, "poll_max_delay": 0.5, "poll_timeout": 120}

for vendor in ("openai", "anthropic"):
    conn_id = f"{vendor}_default"
    for deferrable in (False, True):
        mode = "deferred" if deferrable else "worker"
        for shape in ("one", "kill"):
            dag_id = f"ijl_{vendor}_{mode}_{shape}"
            with DAG(dag_id, **dag_args(*RETRIES[vendor])):

                @task(task_id="report")
                def report(**context: Any) -> None:
                    report_paid(context, "pay")

                (
                    AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
                    >> ReportingPaid(
                        task_id="pay",
                        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
                        provider_conn_id=conn_id,
                        request=batch_request(vendor),
                        store=store_for(dag_id),
                        deferrable=deferrable,
                        weekly_budget=5.0,  # the worst case (no estimated_cost) is well under it
                        **FAST_POLL,
                    )
                    >> report()
                )

        dag_id = f"ijl_{vendor}_{mode}_three"
        with DAG(dag_id, **dag_args(*RETRIES[vendor])):
            episodes = AllocateEpisodeOperator.partial(task_id="allocate", store=store_for(dag_id)).expand(
                fingerprint=["first", "second", "third"]
            )
            ReportingPaid.partial(
                task_id="pay",
                provider_conn_id=conn_id,
                request=batch_request(vendor),
                store=store_for(dag_id),
                deferrable=deferrable,
                **FAST_POLL,
            ).expand(episode_id=episodes.output)

    # Refused on try 1 of 5, before anything is sent: a model without prices, a request without an
    # output bound (its worst case is unbounded), a worst case over the week's budget.
    dag_id = f"ijl_{vendor}_refused"
    with DAG(dag_id, **dag_args(4, 0.0)):
        for task_id, request, budget in (
            ("unpriced", batch_request(vendor, model="no-such-model"), None),
            ("unbounded", batch_request(vendor, max_tokens=None), 5.0),
            ("over_budget", batch_request(vendor), 0.0001),
        ):
            AllocateEpisodeOperator(task_id=f"allocate_{task_id}", store=store_for(dag_id)) >> ReportingPaid(
                task_id=task_id,
                episode_id=f"{{{{ ti.xcom_pull(task_ids='allocate_{task_id}') }}}}",
                provider_conn_id=conn_id,
                request=request,
                store=store_for(dag_id),
                weekly_budget=budget,
                **FAST_POLL,
            )

# A prepared JSONL file: the function prepares it on every try, so the fingerprint binds the
# episode to the file's bytes. No retries: the runner re-runs the DAG run (same run id) instead.
with DAG("ijl_openai_file", **dag_args(0, 0.0)):
    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijl_openai_file"))

    @task.paid_generation(
        task_id="pay",
        provider_conn_id="openai_default",
        episode_id=allocate.output,
        store=store_for("ijl_openai_file"),
        **FAST_POLL,
    )
    def pay(**context: Any) -> dict[str, Any]:
        request = prepare_request({"input_file": {"path": os.environ["IJL_JSONL"]}})
        observe("prepared", context, sha256=request["input_file"]["sha256"])
        return request

    pay()
