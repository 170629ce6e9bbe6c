"""Airflow's own LLM batch operators and ours, one weekly DAG each, paying the same batch on the same APIs.

Every DAG has the weekly shape of ``example_dags/weekly_media_pipeline.py`` (Mondays 06:00, no
catch-up, ``retries=3`` with no delay) and sends the same two prompts to a local double of the
vendor's API (each in its own OS process), through the connections the runner sets:

* ``sbs_openai_trigger``: upload the JSONL (free), then apache-airflow-providers-openai's
  ``OpenAITriggerBatchOperator`` on the ``openai`` connection ``sbs_openai``;
* ``sbs_llm_batch_openai`` / ``sbs_llm_batch_anthropic``: apache-airflow-providers-common-ai's
  ``LLMBatchOperator`` on ``pydanticai`` connections (model ``openai:...`` / ``anthropic:...``);
* ``sbs_anthropic_batch``: apache-airflow-providers-anthropic's ``AnthropicBatchOperator`` on the
  ``anthropic`` connection ``sbs_anthropic``;
* ``sbs_ours_openai`` / ``sbs_ours_anthropic``: ``AllocateEpisodeOperator`` then
  ``PaidGenerationOperator`` on the same ``sbs_openai`` / ``sbs_anthropic`` connections, their hook
  named by ``provider_hook`` (both connection types are registered by Airflow's own providers,
  whose hooks build no paid provider).

All poll synchronously and at once (the doubles end a batch on its first status read);
``LLMBatchOperator`` refuses a ``poll_interval`` under 30 s, but its first poll comes before its
first sleep.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.anthropic.operators.batch import AnthropicBatchOperator
from airflow.providers.common.ai.operators.llm_batch import LLMBatchOperator
from airflow.providers.openai.hooks.openai import OpenAIHook
from airflow.providers.openai.operators.openai import OpenAITriggerBatchOperator
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from tests.airflow.llm_side_by_side_scenarios import (
    ANTHROPIC_CONN,
    ANTHROPIC_MODEL,
    MAX_TOKENS,
    OPENAI_CONN,
    OPENAI_MODEL,
    PROMPTS,
    PYDANTICAI_ANTHROPIC_CONN,
    PYDANTICAI_OPENAI_CONN,
)
from tests.airflow.support import store_for

WEEKLY: dict[str, Any] = {
    "schedule": "0 6 * * MON",
    "start_date": pendulum.datetime(2026, 1, 5, tz="UTC"),
    "catchup": False,
    "default_args": {"retries": 3, "retry_delay": dt.timedelta(0)},
    "tags": ["side-by-side"],
}
EPISODE = "{{ ti.xcom_pull(task_ids='allocate') }}"
#: The batch's requests in each API's own shape (the same prompts, models and output bound).
OPENAI_LINES = [
    {
        "custom_id": f"q{index}",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": OPENAI_MODEL,
            "messages": [{"role": "user", "content": prompt}],
            "max_completion_tokens": MAX_TOKENS,
        },
    }
    for index, prompt in enumerate(PROMPTS)
]
ANTHROPIC_REQUESTS = [
    {
        "custom_id": f"q{index}",
        "params": {"model": ANTHROPIC_MODEL, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": p}]},
    }
    for index, p in enumerate(PROMPTS)
]


def _results_root() -> str:
    """Where LLMBatchOperator keeps its intent records and results (a local object-storage path)."""
    root = Path(os.environ.get("IJ_STORES") or tempfile.gettempdir()) / "llm_batch"
    return root.as_uri()


with DAG("sbs_openai_trigger", **WEEKLY):

    @task
    def upload() -> str:
        """The batch's input file, uploaded as the provider's docs show (free: only the batch is billed)."""
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as out:
            out.write("".join(json.dumps(line) + "\n" for line in OPENAI_LINES))
        try:
            return str(OpenAIHook(conn_id=OPENAI_CONN).upload_file(out.name, purpose="batch").id)
        finally:
            os.unlink(out.name)

    upload() >> OpenAITriggerBatchOperator(
        task_id="generate",
        file_id="{{ ti.xcom_pull(task_ids='upload') }}",
        endpoint="/v1/chat/completions",
        conn_id=OPENAI_CONN,
        wait_seconds=0.05,
        timeout=60,
    )

for name, conn_id, model in (
    ("sbs_llm_batch_openai", PYDANTICAI_OPENAI_CONN, f"openai:{OPENAI_MODEL}"),
    ("sbs_llm_batch_anthropic", PYDANTICAI_ANTHROPIC_CONN, f"anthropic:{ANTHROPIC_MODEL}"),
):
    with DAG(name, **WEEKLY):
        LLMBatchOperator(
            task_id="generate",
            requests=list(PROMPTS),
            result_path=f"{_results_root()}/{{{{ dag.dag_id }}}}/{{{{ run_id }}}}",
            llm_conn_id=conn_id,
            model_id=model,
            max_tokens=MAX_TOKENS,
            poll_interval=30,
            timeout=120,
            deferrable=False,
        )

with DAG("sbs_anthropic_batch", **WEEKLY):
    AnthropicBatchOperator(
        task_id="generate",
        requests=ANTHROPIC_REQUESTS,
        conn_id=ANTHROPIC_CONN,
        poll_interval=0.05,
        timeout=60,
        deferrable=False,
    )

for name, conn_id, hook, request in (
    (
        "sbs_ours_openai",
        OPENAI_CONN,
        "airflow_idempotent_jobs.vendors.openai.hook.OpenAIBatchHook",
        {"requests": [{"custom_id": line["custom_id"], "body": line["body"]} for line in OPENAI_LINES]},
    ),
    (
        "sbs_ours_anthropic",
        ANTHROPIC_CONN,
        "airflow_idempotent_jobs.vendors.anthropic.hook.AnthropicBatchHook",
        {"requests": ANTHROPIC_REQUESTS},
    ),
):
    with DAG(name, **WEEKLY):
        allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for(name))
        allocate >> PaidGenerationOperator(
            task_id="generate",
            episode_id=EPISODE,
            provider_conn_id=conn_id,
            provider_hook=hook,
            request=request,
            store=store_for(name),
            poll_initial_delay=0.05,
            poll_max_delay=0.2,
            poll_timeout=60,
        )
