"""What a DAG file sees at parse time: cheap imports, no I/O in constructors, templated fields."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_idempotent_jobs.errors import (
    AllocationConflict,
    EpisodeNotFound,
    InvalidIdentifier,
    StoreCorrupted,
    StoreUnavailable,
    SubmissionStateUnknown,
)
from airflow_idempotent_jobs.hooks.store import default_store_path
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from airflow_idempotent_jobs.operators._common import AirflowFailException, task_errors
from airflow_idempotent_jobs.task_key import default_allocation_key

pytestmark = pytest.mark.airflow


def test_importing_the_operators_loads_no_store_hook_or_paid_layer() -> None:
    code = (
        "import sys, json, airflow.sdk; before = set(sys.modules);"
        "import airflow_idempotent_jobs.operators;"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    added = json.loads(done.stdout.strip().splitlines()[-1])
    # The "Episode" extra link's base class and its module come along (no FastAPI, no plugin).
    assert added == [
        "airflow.sdk.bases.operatorlink",
        "airflow_idempotent_jobs.links",
        "airflow_idempotent_jobs.links.episode",
        "airflow_idempotent_jobs.operators",
        "airflow_idempotent_jobs.operators._common",
        "airflow_idempotent_jobs.operators._effect_step",
        "airflow_idempotent_jobs.operators._metrics",
        "airflow_idempotent_jobs.operators.allocate",
        "airflow_idempotent_jobs.operators.check_episodes",
        "airflow_idempotent_jobs.operators.effect",
        "airflow_idempotent_jobs.operators.paid_generation",
    ]


def test_constructors_only_store_their_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    allocate = AllocateEpisodeOperator(task_id="a", store=str(tmp_path / "store"), store_conn_id="not_defined")
    paid = PaidGenerationOperator(
        task_id="p", episode_id="{{ ti.xcom_pull('a') }}", provider_conn_id="not_defined", request={"x": 1}
    )
    assert (allocate.store, allocate.store_conn_id, allocate.week_source) == (
        str(tmp_path / "store"),
        "not_defined",
        None,
    )
    assert (paid.episode_id, paid.provider_conn_id, paid.deferrable) == (
        "{{ ti.xcom_pull('a') }}",
        "not_defined",
        False,
    )
    assert list(tmp_path.iterdir()) == []  # nothing created, no connection looked up (it would raise)


def test_templated_fields() -> None:
    assert set(AllocateEpisodeOperator.template_fields) == {
        "week",
        "allocation_key",
        "fingerprint",
        "store",
        "timezone",
    }
    assert set(PaidGenerationOperator.template_fields) == {"episode_id", "request", "store", "require_approval"}


def test_week_source_is_checked_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match="week_source must be one of"):
        AllocateEpisodeOperator(task_id="a", week_source="start_date")


def test_default_key_and_default_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_allocation_key("d", "t", "scheduled__2026-08-03", -1) == "airflow:d:t:scheduled__2026-08-03"
    assert default_allocation_key("d", "t", "r", None) == "airflow:d:t:r"
    assert default_allocation_key("d", "t", "r", 2) == "airflow:d:t:r:2"
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "idempotent_jobs"


@pytest.mark.parametrize(
    "error",
    [
        InvalidIdentifier("episode id", "x", "bad"),
        AllocationConflict("k", "held in another week", ("2026-W32-0",)),
        StoreCorrupted("/s/state.json", "unknown schema_version 9"),
        EpisodeNotFound("2026-W32-9"),
        SubmissionStateUnknown("2026-W32-0"),
    ],
)
def test_errors_a_retry_cannot_fix_fail_the_task(error: Exception) -> None:
    with pytest.raises(AirflowFailException) as caught, task_errors():
        raise error
    assert caught.value.__cause__ is error
    assert str(caught.value) == str(error)


@pytest.mark.parametrize("error", [StoreUnavailable("lock timeout"), OSError("disk"), RuntimeError("x")])
def test_other_errors_stay_retryable(error: Exception) -> None:
    with pytest.raises(type(error)) as caught, task_errors():
        raise error
    assert caught.value is error


# -- which executors count as one host -------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "distributed"),
    [
        ("LocalExecutor", []),
        (" LocalExecutor ", []),
        ("airflow.executors.local_executor.LocalExecutor", []),
        ("my_local:airflow.executors.local_executor.LocalExecutor", []),
        ("fast:LocalExecutor", []),
        ("SequentialExecutor", []),  # Airflow 2's single-process executor
        ("CeleryExecutor", ["CeleryExecutor"]),
        ("KubernetesExecutor", ["KubernetesExecutor"]),
        (
            "airflow.providers.celery.executors.celery_executor.CeleryExecutor",
            ["airflow.providers.celery.executors.celery_executor.CeleryExecutor"],
        ),
        ("airflow.providers.edge3.executors.EdgeExecutor", ["airflow.providers.edge3.executors.EdgeExecutor"]),
        ("LocalExecutor,CeleryExecutor", ["CeleryExecutor"]),  # a task may be routed to either
        ("LocalExecutor;team_a=KubernetesExecutor", ["KubernetesExecutor"]),
        ("=LocalExecutor", []),
        ("my.company.executors.LocalLikeExecutor", ["my.company.executors.LocalLikeExecutor"]),  # unknown: not local
        ("LocalExecutorX", ["LocalExecutorX"]),
        ("", ["''"]),  # nothing configured proves nothing
    ],
)
def test_only_executors_known_to_be_local_count_as_one_host(config: str, distributed: list[str]) -> None:
    from airflow_idempotent_jobs.hooks._executors import distributed_executors

    assert distributed_executors(config, environ={}) == distributed


def test_a_kubernetes_task_pod_is_distributed_whatever_its_config_says() -> None:
    from airflow_idempotent_jobs.hooks._executors import distributed_executors

    (found,) = distributed_executors("LocalExecutor", environ={"AIRFLOW_IS_K8S_EXECUTOR_POD": "True"})
    assert found.startswith("KubernetesExecutor")


def test_the_configured_executor_is_read_from_airflows_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_idempotent_jobs.hooks._executors import configured_executors

    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor,CeleryExecutor")
    assert configured_executors() == "LocalExecutor,CeleryExecutor"


# -- templates that render nothing (item 2) --------------------------------------------------------
@pytest.mark.parametrize("rendered", [None, "", "   ", "None", "none", " NONE ", "null", "NULL", "\tNull\n"])
def test_empty_renderings_are_refused_naming_field_and_template(rendered: str | None) -> None:
    from airflow_idempotent_jobs.operators._common import refuse_empty_renderings

    with pytest.raises(AirflowFailException) as caught:
        refuse_empty_renderings("allocate", {"allocation_key": "{{ x }}"}, {"allocation_key": rendered})
    message = str(caught.value)
    assert message.startswith(f"allocate: allocation_key rendered {rendered!r} from the template '{{{{ x }}}}'")
    assert "\n" not in message


@pytest.mark.parametrize("rendered", ["None-1", "nullable", "0", "n"])
def test_values_that_merely_look_empty_pass(rendered: str) -> None:
    from airflow_idempotent_jobs.operators._common import refuse_empty_renderings

    refuse_empty_renderings("allocate", {"allocation_key": "{{ x }}"}, {"allocation_key": rendered})
    refuse_empty_renderings("allocate", {"week": None}, {"week": None})  # not given: nothing to check


def test_a_refused_store_template_is_named_without_its_password() -> None:
    from airflow_idempotent_jobs.operators._common import refuse_empty_renderings

    template = "{% if false %}postgresql://u:hunter22@db/jobs{% endif %}"
    with pytest.raises(AirflowFailException) as caught:
        refuse_empty_renderings("allocate", {"store": template}, {"store": ""})
    assert "hunter22" not in str(caught.value) and "u:***@db" in str(caught.value)


def test_key_per_map_index_is_an_argument_with_a_safe_default() -> None:
    assert AllocateEpisodeOperator(task_id="a").key_per_map_index is True
    assert AllocateEpisodeOperator(task_id="b", key_per_map_index=False).key_per_map_index is False


# -- the default key stays within 512 characters (item 5) ------------------------------------------
def test_short_default_keys_are_exactly_what_they_were() -> None:
    run_id = "scheduled__2026-08-03T00:00:00+00:00"
    assert default_allocation_key("weekly", "allocate", run_id, 3) == f"airflow:weekly:allocate:{run_id}:3"
    # Exactly 512 characters: still the plain key (existing episodes keep their keys).
    dag_id = "d" * (512 - len("airflow::allocate:") - len(run_id))
    key = default_allocation_key(dag_id, "allocate", run_id, None)
    assert len(key) == 512 and key == f"airflow:{dag_id}:allocate:{run_id}"


def test_maximal_ids_give_a_bounded_stable_distinct_key() -> None:
    import hashlib

    from airflow_idempotent_jobs.identity import validate_allocation_key

    dag_id, task_id, run_id = "d" * 250, "t" * 250, "manual__" + "r" * 242
    key = default_allocation_key(dag_id, task_id, run_id, 1023)
    full = f"airflow:{dag_id}:{task_id}:{run_id}:1023"
    assert len(key) == 512 and validate_allocation_key(key) == key
    assert key.startswith(f"airflow#{dag_id}:{task_id[:100]}")
    assert key.endswith("#" + hashlib.sha256(full.encode()).hexdigest())
    assert default_allocation_key(dag_id, task_id, run_id, 1023) == key  # stable: a retry finds it
    others = {
        default_allocation_key(dag_id, task_id, run_id, 1022),
        default_allocation_key(dag_id, task_id, run_id[:-1] + "s", 1023),  # differs past the kept prefix
        default_allocation_key(dag_id, task_id, run_id, None),
    }
    assert key not in others and len(others) == 3
    # No plain key can equal a bounded one: plain default keys start "airflow:", bounded "airflow#".
    assert not key.startswith("airflow:")


def test_bounding_does_not_hide_what_the_store_refuses() -> None:
    with pytest.raises(InvalidIdentifier):
        default_allocation_key("d" * 250, "t" * 250, "manual__" + "r" * 230 + "\x07", None)
