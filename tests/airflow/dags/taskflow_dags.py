"""Test DAGs for ``@task.paid_generation`` and ``@task.episode`` (run by ``test_taskflow_runs.py``).

The decorated functions record each call (``built``/``ran``: try number, request, whether the call
came from the resumed ``execute_complete``), and every task records why it failed
(``on_failure_callback``), so the tests can tell whether a function ran before a refusal.
"""

from __future__ import annotations

import inspect
from typing import Any

from airflow.sdk import DAG, get_current_context, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from tests.airflow.support import manual_dag, observe, report_paid, store_for

FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.05, "poll_max_delay": 0.2, "poll_timeout": 60}


def record_failure(context: Any) -> None:
    observe("failed", context, message=str(context.get("exception")))


def built(request: dict[str, Any]) -> dict[str, Any]:
    """Record that the paid function ran (and where from), then hand back its request."""
    resumed = any(frame.function == "execute_complete" for frame in inspect.stack())
    observe("built", get_current_context(), request=request, resumed=resumed)
    return request


def fails_observed(retries: int) -> dict[str, Any]:
    args = manual_dag(retries=retries)
    args["default_args"] = {**args["default_args"], "on_failure_callback": record_failure}
    return args


# -- a paid step built from upstream XComs, next to the same step as a classic operator ---------
for dag_id, deferrable in (("ijt_paid_xcoms", False), ("ijt_paid_deferred", True)):
    with DAG(dag_id, **fails_observed(retries=2)):
        episode_id = AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id)).output

        @task
        def topic() -> str:
            return "the week in review"

        @task
        def units() -> int:
            return 2

        @task.paid_generation(
            provider_conn_id="ijt_provider",
            episode_id=episode_id,
            store=store_for(dag_id),
            deferrable=deferrable,
            **FAST_POLL,
        )
        def generate(topic: Any, units: Any, episode_id: Any) -> dict[str, Any]:  # "-> dict": XComs stay the operator's
            return built({"prompt": f"{topic} ({episode_id})", "units": units})

        @task(task_id="report")
        def report(**context: Any) -> None:
            report_paid(context, "generate")

        generate(topic(), units(), episode_id) >> report()

with DAG("ijt_paid_xcoms_classic", **fails_observed(retries=2)):
    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijt_paid_xcoms_classic"))

    @task
    def classic_topic() -> str:
        return "the week in review"

    (
        allocate
        >> PaidGenerationOperator(
            task_id="generate",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id="ijt_provider",
            request={
                "prompt": "{{ ti.xcom_pull(task_ids='classic_topic') }} ({{ ti.xcom_pull(task_ids='allocate') }})",
                "units": 2,
            },
            store=store_for("ijt_paid_xcoms_classic"),
            **FAST_POLL,
        )
    )
    classic_topic() >> allocate

# -- retries: a lost answer (one job), a request that changed (refused) -------------------------
with DAG("ijt_paid_lost_answer", **fails_observed(retries=2)):
    lost_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijt_paid_lost_answer")).output

    @task.paid_generation(
        provider_conn_id="ijt_provider_lookup",  # tokens not honoured: the retry must look the job up
        episode_id=lost_id,
        store=store_for("ijt_paid_lost_answer"),
        **FAST_POLL,
    )
    def generate_lost(episode_id: Any) -> dict[str, Any]:
        return built({"prompt": f"at most once ({episode_id})"})

    generate_lost(lost_id)

with DAG("ijt_paid_request_changed", **fails_observed(retries=3)):
    changed_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijt_paid_request_changed")).output

    @task.paid_generation(
        provider_conn_id="ijt_provider", episode_id=changed_id, store=store_for("ijt_paid_request_changed"), **FAST_POLL
    )
    def generate_changed(ti: Any = None) -> dict[str, Any]:
        return built({"prompt": "teaser", "variant": ti.try_number})

    generate_changed()

# A custom provider (tests/airflow/test_custom_provider_hook.py: its own client, lookup by token) named
# by provider_hook= on a plain http connection, deferred; the scenario loses the first submit answer.
with DAG("ijt_paid_custom_hook", **fails_observed(retries=2)):
    custom_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijt_paid_custom_hook")).output

    @task.paid_generation(
        provider_conn_id="ijt_jobs",
        provider_hook="tests.airflow.test_custom_provider_hook.JobClientHook",
        episode_id=custom_id,
        store=store_for("ijt_paid_custom_hook"),
        deferrable=True,
        **FAST_POLL,
    )
    def generate_custom(episode_id: Any) -> dict[str, Any]:
        return built({"prompt": f"custom teaser for {episode_id}", "units": 2})

    generate_custom(custom_id)

# One episode, two requests: a mapped paid step; one map index pays, the other is refused.
with DAG("ijt_paid_two_requests", **fails_observed(retries=3)):
    two_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijt_paid_two_requests")).output

    @task.paid_generation(
        provider_conn_id="ijt_provider", episode_id=two_id, store=store_for("ijt_paid_two_requests"), **FAST_POLL
    )
    def generate_mapped(prompt: str) -> dict[str, Any]:
        return built({"prompt": prompt})

    generate_mapped.expand(prompt=["cover art", "trailer"])

# -- refused before the function runs (ids), or after it ran but before anything is sent ----------
with DAG("ijt_paid_refused", **fails_observed(retries=3)):
    for task_id, bad_id, request in (
        ("unknown", "2026-W32-99", {"prompt": "never sent"}),
        ("malformed", "2026-W32-007", {"prompt": "never sent"}),
        ("missing", "{{ ti.xcom_pull(task_ids='no_such_task') }}", {"prompt": "never sent"}),
        ("not_a_dict", "2026-W32-0", ["prompt", "never sent"]),  # the scenario allocates 2026-W32-0
        ("nan", "2026-W32-0", {"prompt": "never sent", "units": float("nan")}),
    ):

        @task.paid_generation(
            task_id=task_id,
            provider_conn_id="ijt_provider",
            episode_id=bad_id,
            store=store_for("ijt_paid_refused"),
        )
        def refused(request: Any = request) -> Any:
            return built(request)

        refused()

# -- @task.episode ---------------------------------------------------------------------------------
with DAG("ijt_episode_step", **fails_observed(retries=3)):
    step_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ijt_episode_step")).output

    @task
    def media() -> str:
        return "https://media.invalid/cut.mp4"

    @task.episode(episode_id=step_id, store=store_for("ijt_episode_step"))
    def publish(url: Any, episode: Any = None) -> dict[str, Any]:  # a default, as for ti=None: mypy
        seen = {
            "type": type(episode).__name__,
            "episode_id": episode.episode_id,
            "week_id": episode.week_id,
            "allocation_key": episode.allocation_key,
            "submission": episode.submission.state.value,
        }
        observe("ran", get_current_context(), episode=seen, url=url)
        return {"published": episode.episode_id, "url": url}

    @task(task_id="report")
    def report_published(**context: Any) -> None:
        observe("published_xcom", context, value=context["ti"].xcom_pull(task_ids="publish"))

    @task.episode(episode_id=step_id, store=store_for("ijt_episode_step"))
    def reassemble(part: Any, episode: Any = None) -> str:
        observe("ran", get_current_context(), episode={"episode_id": episode.episode_id}, url=part)
        return f"{episode.episode_id}/{part}"

    publish(media()) >> report_published()
    reassemble.expand(part=["intro", "outro"])

with DAG("ijt_episode_refused", **fails_observed(retries=3)):
    for task_id, bad_id, store, store_conn_id in (
        ("unknown", "2026-W32-99", store_for("ijt_episode_refused"), None),
        ("malformed", "2026-W32-007", None, "ijt_store_never_read"),
        ("missing", "{{ ti.xcom_pull(task_ids='no_such_task') }}", None, "ijt_store_never_read"),
    ):

        @task.episode(task_id=task_id, episode_id=bad_id, store=store, store_conn_id=store_conn_id)
        def never(episode: Any = None) -> None:
            observe("ran", get_current_context(), episode_id=episode.episode_id)

        never()

# -- a store URL with a password (nothing listens on port 9): sealed in the rendered fields; retried
SECRET_STORE = "postgresql://ijt:ijt-store-password-5e1f@127.0.0.1:9/nowhere"
with DAG("ijt_secret_store", **fails_observed(retries=1)):

    @task.paid_generation(provider_conn_id="ijt_provider", episode_id="2026-W32-0", store=SECRET_STORE)
    def paid_secret() -> dict[str, Any]:
        return built({"prompt": "never sent"})

    @task.episode(episode_id="2026-W32-0", store=SECRET_STORE)
    def step_secret(episode: Any = None) -> None:
        observe("ran", get_current_context())

    paid_secret()
    step_secret()
