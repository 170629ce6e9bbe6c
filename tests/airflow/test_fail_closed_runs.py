"""The Airflow layer fails closed, under real ``dag.test()`` runs with CeleryExecutor configured.

Every scenario runs once in one process (``fail_closed_scenarios.py``) on a copy of the session's
migrated metadata database; each test checks one promise against what the tasks observed, the
task instances Airflow recorded, the rendered fields it stored, and the episode stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import fresh_pg_database, observed, scenario_home
from tests.airflow.scenario_process import ti as task_instance

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]

HERE = Path(__file__).resolve().parent
LONG_PASSWORD = "long-Variable-password-7f3a91"
SHORT_PASSWORD = "Qz9"  # under the secrets masker's 5-character minimum
CONN_PASSWORD = "conn-field-password-5d2e"
HOST_PASSWORD = "password-in-the-host-88c1"
SETTING_PASSWORD = "hunter2-setting"
LONG_DAG_ID = "ijg_long_" + "d" * 241
LONG_TASK_ID = "allocate_" + "t" * 241
MAPPED_LONG_TASK_ID = "mapped_" + "m" * 243


@pytest.fixture(scope="session")
def fail_closed_pg(request: pytest.FixtureRequest) -> Iterator[str | None]:
    with fresh_pg_database(request) as url:
        yield url


@pytest.fixture(scope="session")
def fail_closed_results(
    airflow_home: AirflowHome, fail_closed_pg: str | None, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Every scenario of fail_closed_scenarios.py, in one process, with CeleryExecutor configured."""
    where = scenario_home(airflow_home.home, tmp_path_factory, "fail-closed-home", [HERE / "dags_fail_closed"])
    conn_store = where.work / "conn-store"
    env = where.env(
        connections={"ijg_file_store": {"conn_type": "idempotent_jobs_store", "host": str(conn_store)}},
        AIRFLOW__CORE__EXECUTOR="CeleryExecutor",
        IJG_CONN_STORE=str(conn_store),
    )
    if fail_closed_pg is not None:
        parts = urlsplit(fail_closed_pg)
        hostport = f"{parts.hostname}:{parts.port or 5432}"
        database = parts.path.lstrip("/")
        env.update(
            IJG_PG_URL=fail_closed_pg,
            AIRFLOW_VAR_IJG_PG_USER=parts.username or "postgres",
            AIRFLOW_VAR_IJG_PG_PASS=LONG_PASSWORD,
            AIRFLOW_VAR_IJG_PG_PW=SHORT_PASSWORD,
            AIRFLOW_VAR_IJG_PG_HOSTPORT=hostport,
            AIRFLOW_VAR_IJG_PG_DB=database,
            AIRFLOW_CONN_IJG_PG_CONN=json.dumps(
                {
                    "conn_type": "idempotent_jobs_store",
                    "host": f"postgresql://{hostport}/{database}?namespace=ijg-conn",
                    "login": parts.username or "postgres",
                    "password": CONN_PASSWORD,
                }
            ),
            AIRFLOW_CONN_IJG_PG_CONN_HOST_PASSWORD=json.dumps(
                {
                    "conn_type": "idempotent_jobs_store",
                    "host": f"postgresql://{parts.username or 'postgres'}:{HOST_PASSWORD}@{hostport}/{database}",
                }
            ),
        )
    return where.run("tests.airflow.fail_closed_scenarios", env, timeout=360)


def ti(run: dict[str, Any], task_id: str, map_index: int = -1) -> tuple[str, int]:
    found = task_instance(run, task_id, map_index)
    return found["state"], found["try_number"]


def failure(run: dict[str, Any], task_id: str, map_index: int = -1) -> str:
    """The one message the task failed with; it failed on its first try (retries=3 unused)."""
    assert ti(run, task_id, map_index) == ("failed", 1)
    (seen,) = [o for o in observed(run, "failed", task_id) if o["map_index"] == map_index]
    assert seen["error"] == "AirflowFailException"
    message: str = seen["message"]
    assert "\n" not in message, message
    return message


def returned(run: dict[str, Any], task_id: str, map_index: int = -1) -> Any:
    """What the task returned; it succeeded (a cleared run's task instance counts its tries on)."""
    assert ti(run, task_id, map_index)[0] == "success", run["tis"]
    seen = [o for o in observed(run, "returned", task_id) if o["map_index"] == map_index]
    assert len(seen) == 1, seen
    return seen[0]["value"]


# -- no implicit per-host store under a distributed executor ---------------------------------------
def test_no_store_under_celery_fails_on_the_first_try_naming_the_settings(
    fail_closed_results: dict[str, Any],
) -> None:
    result = scenario(fail_closed_results, "default_store")
    for run, task_id in (
        (result["refused"], "allocate"),
        (result["refused"], "check"),
        (result["refused_paid"], "generate"),
    ):
        message = failure(run, task_id)
        assert "CeleryExecutor" in message
        for setting in ("store=", "store_conn_id=", "[idempotent_jobs] store", "AIRFLOW__IDEMPOTENT_JOBS__STORE"):
            assert setting in message, message
    # Nothing was created under $AIRFLOW_HOME: the refusal comes before the store is opened.
    assert result["home_store_after_refusal"] is False
    assert result["home_store_at_end"] is False


def test_the_deployment_setting_configures_the_store(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "default_store")
    assert returned(result["by_setting"], "allocate") == "2026-W32-0"
    assert [e["allocation_key"] for e in result["by_setting_store"]] == [
        f"airflow:ijg_default_store:allocate:{result['by_setting']['run_id']}"
    ]
    assert returned(result["by_setting_conn"], "allocate") == "2026-W32-0"
    assert returned(result["by_setting_conn"], "check") == ["2026-W32-0"]


def test_two_deployment_settings_or_a_bad_one_fail_without_retry(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "default_store")
    message = failure(result["both_settings"], "allocate")
    assert "[idempotent_jobs] store" in message and "store_conn_id" in message
    message = failure(result["bad_setting"], "allocate")
    assert "[idempotent_jobs] store" in message and "ftp" in message
    assert SETTING_PASSWORD not in message
    assert SETTING_PASSWORD not in Path(fail_closed_results["_log"]).read_text(errors="replace")


def test_an_explicit_store_or_connection_allocates_under_celery(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "default_store")
    run = result["explicit"]
    assert returned(run, "by_store") == "2026-W32-0"
    assert [e["allocation_key"] for e in result["explicit_store"]] == [
        f"airflow:ijg_explicit_store:by_store:{run['run_id']}"
    ]
    assert returned(run, "by_conn") == "2026-W32-1"  # the conn store already holds the setting's run
    assert sorted(e["allocation_key"] for e in result["conn_store"]) == sorted(
        [
            f"airflow:ijg_default_store:allocate:{result['by_setting_conn']['run_id']}",
            f"airflow:ijg_explicit_store:by_conn:{run['run_id']}",
        ]
    )


def test_time_zone_setting_applies_to_dags_without_a_zone_of_their_own(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "zones")
    assert returned(result["without_setting"], "allocate") == "2026-W31-0"  # UTC: Sunday 2026-08-02
    assert returned(result["default"], "allocate") == "2026-W33-0"  # Berlin: Monday 2026-08-10
    assert returned(result["default"], "allocate_utc") == "2026-W32-0"  # the operator's argument wins
    assert returned(result["new_york"], "allocate") == "2026-W32-0"  # the DAG's own zone wins
    message = failure(result["bad"], "allocate")
    assert "[idempotent_jobs] timezone" in message and "Mars/Olympus_Mons" in message


# -- templates that render None --------------------------------------------------------------------
REFUSED_TEMPLATES = {
    "key_none": ("allocation_key", "None", "{{ dag_run.conf.get('key') }}"),
    "key_blank": ("allocation_key", "  ", "{{ '  ' }}"),
    "key_null": ("allocation_key", "NULL", "{{ 'NULL' }}"),
    "key_empty": ("allocation_key", "", "{{ dag_run.conf.get('key', '') }}"),
    "week_none": ("week", "None", "{{ dag_run.conf.get('week') }}"),
    "fingerprint_none": ("fingerprint", "None", "{{ dag_run.conf.get('hash') }}"),
    "timezone_none": ("timezone", "None", "{{ dag_run.conf.get('tz') }}"),
    "store_empty": ("store", "", "{{ dag_run.conf.get('store', '') }}"),
}


def test_templates_rendering_none_fail_without_retry_naming_the_template(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "templates")
    for name in ("first", "second"):
        run = result[name]
        for task_id, (field, rendering, template) in REFUSED_TEMPLATES.items():
            message = failure(run, task_id)
            assert f"{field} rendered {rendering!r}" in message, message
            assert template in message, message
        assert returned(run, "key_given") == "2026-W32-0"  # "fallback": the second run reuses it (same key)
    # Nothing but the control's key was allocated: no episode under "None", "NULL" or a blank key.
    assert [e["allocation_key"] for e in result["store"]] == ["fallback"]


def test_an_explicit_key_on_a_mapped_task_keeps_the_map_index(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "mapped_key")
    run = result["run"]
    per_item = {i: returned(run, "per_item", i) for i in range(3)}
    assert sorted(per_item.values()) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    by_key = {e["allocation_key"]: e["episode_id"] for e in result["store"]}
    assert by_key == {f"batch-2026-08-03:{i}": per_item[i] for i in range(3)}
    # key_per_map_index=False: the author asked for one episode shared by every map index.
    assert [returned(run, "shared", i) for i in range(3)] == ["2026-W32-0"] * 3
    assert [e["allocation_key"] for e in result["shared_store"]] == ["shared-2026-08-03"]


# -- credentials never reach the rendered fields ---------------------------------------------------
def secret_run(results: dict[str, Any]) -> dict[str, Any]:
    result = scenario(results, "secret_store")
    if "skipped" in result:
        pytest.skip(result["skipped"])
    return result


def test_rendered_store_url_has_no_password(fail_closed_results: dict[str, Any]) -> None:
    result = secret_run(fail_closed_results)
    run, rendered = result["run"], result["rendered"]
    assert returned(run, "allocate") == "2026-W32-0"
    assert returned(run, "allocate_short") == "2026-W32-1"
    assert sorted(returned(run, "mapped", i) for i in range(2)) == ["2026-W32-2", "2026-W32-3"]
    assert returned(run, "check") == ["2026-W32-0", "2026-W32-1", "2026-W32-2", "2026-W32-3"]
    assert "episode 2026-W32-9 not found" in failure(run, "generate")
    padded = failure(run, "allocate_padded")
    assert "store: URL: starts with blanks or a line break" in padded and LONG_PASSWORD not in padded, padded
    padded_store = rendered["allocate_padded[-1]"]["store"]
    assert padded_store.strip().startswith("postgresql://") and "***" in padded_store, padded_store
    for task in ("allocate[-1]", "allocate_short[-1]", "mapped[0]", "mapped[1]", "check[-1]", "generate[-1]"):
        store = rendered[task]["store"]
        assert store.startswith("postgresql://") and "***" in store, store
        assert LONG_PASSWORD not in json.dumps(rendered)
    assert f":{SHORT_PASSWORD}@" not in json.dumps(rendered)
    log = Path(fail_closed_results["_log"]).read_text(errors="replace")
    assert LONG_PASSWORD not in log and f":{SHORT_PASSWORD}@" not in log


def test_store_connection_takes_the_password_from_its_password_field(fail_closed_results: dict[str, Any]) -> None:
    result = secret_run(fail_closed_results)
    run = result["run"]
    assert returned(run, "by_conn") == "2026-W32-0"  # namespace ijg-conn: its own sequence
    message = failure(run, "by_conn_host_password")
    assert "ijg_pg_conn_host_password" in message and "password field" in message
    assert HOST_PASSWORD not in message
    assert HOST_PASSWORD not in Path(fail_closed_results["_log"]).read_text(errors="replace")


# -- the check operator on a mapped allocation -----------------------------------------------------
def test_check_accepts_the_list_a_mapped_allocation_pushes(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "check_mapped")
    run = result["run"]
    ids = sorted(e["episode_id"] for e in result["store"])
    assert ids == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    assert sorted(returned(run, "check")) == ids
    message = failure(run, "check_bad")
    assert "episode_ids" in message and "7" in message
    message = failure(run, "check_none")
    assert "episode_ids rendered 'None'" in message


# -- a default key longer than 512 characters ------------------------------------------------------
def test_maximal_ids_give_a_bounded_stable_key(fail_closed_results: dict[str, Any]) -> None:
    result = scenario(fail_closed_results, "long_ids")
    first, again = result["first"], result["again"]
    assert first["run_id"] == again["run_id"]
    tasks = [(LONG_TASK_ID, -1), (MAPPED_LONG_TASK_ID, 0), (MAPPED_LONG_TASK_ID, 1)]
    got = {task: returned(first, *task) for task in tasks}
    assert sorted(got.values()) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]
    assert {task: returned(again, *task) for task in tasks} == got  # found again: the same bounded keys
    (key,) = {o["key"] for o in observed(first, "xcoms") + observed(again, "xcoms")}
    assert len(key) == 512 and key.startswith(f"airflow#{LONG_DAG_ID}:{LONG_TASK_ID[:100]}")
    keys = [e["allocation_key"] for e in result["store"]]
    assert len(keys) == len(set(keys)) == 3 and all(len(k) == 512 for k in keys)
    assert key in keys
