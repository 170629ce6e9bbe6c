"""Test DAGs for PaidGenerationOperator against the real local provider server."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from tests.airflow.support import CrashingPaidGeneration, manual_dag, observe, report_paid, store_for

FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.05, "poll_max_delay": 0.2, "poll_timeout": 60}

# Bad episode ids (and an episode whose submission record contradicts itself) fail on the first
# try, before the provider connection is looked up.
with DAG("ij_paid_bad_ids", **manual_dag(retries=3)):
    for task_id, episode_id in (
        ("unknown", "2026-W32-99"),
        ("malformed", "2026-W32-007"),
        ("missing", "{{ ti.xcom_pull(task_ids='no_such_task') }}"),
        ("corrupt", "2026-W32-0"),  # the scenario damages its submission record first
    ):
        CrashingPaidGeneration(
            task_id=task_id,
            episode_id=episode_id,
            provider_conn_id="ij_provider",
            request={"prompt": "never sent"},
            store=store_for("ij_paid_bad_ids"),
        )

# Allocate, pay, report; the paid step crashes after acceptance on try 1 (conf fail_on_try=1).
for dag_id, deferrable in (("ij_paid_worker", False), ("ij_paid_deferred", True)):
    with DAG(dag_id, **manual_dag(retries=2)):

        @task(task_id="report")
        def report(**context: Any) -> None:
            report_paid(context, "generate")

        allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
        generate = CrashingPaidGeneration(
            task_id="generate",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id="ij_provider",
            request={"prompt": "weekly teaser for {{ ti.xcom_pull(task_ids='allocate') }}", "units": 2},
            store=store_for(dag_id),
            deferrable=deferrable,
            **FAST_POLL,
        )
        allocate >> generate >> report()

# Both fail on try 1 of 4: ij_provider_plain neither honours tokens nor offers lookup, and the
# scenario makes it lose the submit answer; ij_provider_bad_config has an extra key no provider
# config knows.
for dag_id, conn_id in (("ij_paid_lost_answer", "ij_provider_plain"), ("ij_paid_bad_config", "ij_provider_bad_config")):
    with DAG(dag_id, **manual_dag(retries=3)):
        AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id)) >> CrashingPaidGeneration(
            task_id="generate",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id=conn_id,
            request={"prompt": "at most once"},
            store=store_for(dag_id),
            **FAST_POLL,
        )

# One episode, two requests: a mapped paid step over "cover art" and "trailer". Exactly one of
# them pays; the other fails on its first try (retries=3) naming both request fingerprints.
with DAG("ij_paid_two_requests", **manual_dag(retries=3)):
    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_paid_two_requests"))
    allocate >> CrashingPaidGeneration.partial(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="ij_provider",
        store=store_for("ij_paid_two_requests"),
        **FAST_POLL,
    ).expand(request=[{"prompt": "cover art"}, {"prompt": "trailer"}])

# The request renders differently on each try: try 1 pays and crashes after acceptance (conf
# fail_on_try=1), try 2 asks for another request and must fail without paying or retrying.
with DAG("ij_paid_request_changed", **manual_dag(retries=3)):
    AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_paid_request_changed")) >> CrashingPaidGeneration(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="ij_provider",
        request={"prompt": "teaser", "variant": "{{ ti.try_number }}"},
        store=store_for("ij_paid_request_changed"),
        **FAST_POLL,
    )

# A provider (ij_raw_provider, started by the scenario) that reports a cost of NaN and a 100 KB
# result: the paid step succeeds, records the anomaly, pushes no NaN and keeps no 100 KB XCom.
for dag_id, deferrable in (("ij_paid_odd_answer", False), ("ij_paid_odd_answer_deferred", True)):
    with DAG(dag_id, **manual_dag(retries=2)):

        @task(task_id="report")
        def report_odd(**context: Any) -> None:
            report_paid(context, "generate")
            ti = context["ti"]
            observe("cost_anomaly", context, value=ti.xcom_pull(task_ids="generate", key="cost_anomaly"))

        (
            AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
            >> CrashingPaidGeneration(
                task_id="generate",
                episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
                provider_conn_id="ij_raw_provider",
                request={"prompt": "odd answer"},
                store=store_for(dag_id),
                deferrable=deferrable,
                **FAST_POLL,
            )
            >> report_odd()
        )

# Costs and budgets that are no amount: each task fails on its first try, before any lookup.
with DAG("ij_paid_bad_amounts", **manual_dag(retries=3)):
    for task_id, amounts in (
        ("nan_estimate", {"estimated_cost": float("nan")}),
        ("negative_estimate", {"estimated_cost": -1.0}),
        ("infinite_budget", {"weekly_budget": float("inf")}),
        ("negative_budget", {"weekly_budget": -5.0}),
        ("negative_zero_estimate", {"estimated_cost": -0.0}),
        ("negative_zero_budget", {"weekly_budget": -0.0}),
    ):
        CrashingPaidGeneration(
            task_id=task_id,
            episode_id="2026-W32-0",  # the scenario allocates it first
            provider_conn_id="ij_provider",
            request={"prompt": "never sent"},
            store=store_for("ij_paid_bad_amounts"),
            **amounts,  # type: ignore[arg-type]
        )

# -- custom providers: a PaidProviderHook named by provider_hook= on plain `http` connections -------
#: Hooks of tests/airflow/test_custom_provider_hook.py; DAG files only name them (the operator imports).
HOOKS = "tests.airflow.test_custom_provider_hook"

# The custom provider (its own client, capability (b): lookup) through provider_hook=, polled by the
# worker or by the trigger (the provider has no astatus: its status runs in a thread). The scenario
# makes the server lose the first submit answer: try 1 fails, try 2 finds the job by its token.
for dag_id, deferrable in (("ij_custom_worker", False), ("ij_custom_deferred", True)):
    with DAG(dag_id, **manual_dag(retries=2)):

        @task(task_id="report")
        def report_custom(**context: Any) -> None:
            report_paid(context, "generate")

        (
            AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
            >> CrashingPaidGeneration(
                task_id="generate",
                episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
                provider_conn_id="ij_jobs",
                provider_hook=f"{HOOKS}.JobClientHook",
                request={"prompt": "custom teaser for {{ ti.xcom_pull(task_ids='allocate') }}", "units": 2},
                store=store_for(dag_id),
                deferrable=deferrable,
                **FAST_POLL,
            )
            >> report_custom()
        )

# A provider_hook (or a connection type) that cannot work fails on try 1 of 4, after the episode is
# loaded; each task names its own connection, so the secrets backend's log shows which read one.
with DAG("ij_custom_bad_hooks", **manual_dag(retries=3)):
    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_custom_bad_hooks"))
    bad_hooks: tuple[tuple[str, str | None, str, str | None], ...] = (
        ("not_importable", None, "ij_jobs_a", "tests.airflow.no_such_module.Hook"),
        ("not_a_hook", None, "ij_jobs_b", "airflow_idempotent_jobs.hooks.store.EpisodeStoreHook"),
        ("get_provider_raises", None, "ij_jobs_broken", f"{HOOKS}.BrokenHook"),
        ("untyped_connection", None, "ij_jobs_untyped", None),
        ("unknown_episode", "2026-W32-99", "ij_jobs_c", f"{HOOKS}.BrokenHook"),
    )
    for task_id, bad_episode, conn_id, bad_hook in bad_hooks:
        allocate >> CrashingPaidGeneration(
            task_id=task_id,
            episode_id=bad_episode or "{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id=conn_id,
            provider_hook=bad_hook,
            request={"prompt": "never sent"},
            store=store_for("ij_custom_bad_hooks"),
            **FAST_POLL,
        )
