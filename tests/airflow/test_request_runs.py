"""``request=`` must be a JSON object, under real ``dag.test()`` runs.

Text (a template that rendered the dict's text, JSON text), ``None``, an omitted request, a list,
a number or a boolean fails the paid task on its first try (two retries configured), naming
``request`` and what it was, before the store's or the provider's Connection is read; nothing is
sent. The same rule holds for what a ``@task.paid_generation`` function returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import server_connection
from tests.airflow.conftest import AirflowHome, RunningProvider, scenario
from tests.airflow.dags_request.request_dags import DECORATED_FIRST, NATIVE_FIRST, OK_FIRST, REFUSED
from tests.airflow.scenario_process import observed, scenario_home, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]

HERE = Path(__file__).resolve().parent
KINDS = {
    "text_template": "a str",
    "json_text": "a str",
    "none": "None",
    "omitted": "None",
    "pairs": "a list",
    "a_list": "a list",
    "a_number": "an int",
    "a_bool": "a bool",
    "native_none": "None",
    "native_text": "a str",
}
FIRST_TRY_FAILED = {"map_index": -1, "state": "failed", "try_number": 1}


@pytest.fixture(scope="session")
def request_results(
    airflow_home: AirflowHome, provider_server: RunningProvider, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "request-home", [HERE / "dags_request"])
    store = {"conn_type": "idempotent_jobs_store", "host": str(where.work / "stores" / "ijr")}  # store_for("ijr")
    env = where.env(
        provider=(provider_server.url, provider_server.token),
        spy_secrets=True,
        connections={"ijr_provider": server_connection(provider_server.url, provider_server.token), "ijr_store": store},
    )
    return where.run("tests.airflow.request_scenarios", env, timeout=380)


def failures(result: dict[str, Any]) -> dict[str, str]:
    return {o["task_id"]: o["message"] for o in observed(result["run"], "failed")}


@pytest.mark.parametrize("dag_id", ["ijr_refused", "ijr_native_refused"])
def test_a_request_that_is_not_a_dict_fails_the_first_try_before_any_lookup(
    request_results: dict[str, Any], dag_id: str
) -> None:
    results = scenario(request_results, "requests")
    result = results[dag_id]
    messages = failures(result)
    task_ids = list(REFUSED) if dag_id == "ijr_refused" else ["native_none", "native_text"]
    for task_id in task_ids:
        assert {k: v for k, v in ti(result["run"], task_id).items() if k != "task_id"} == FIRST_TRY_FAILED, task_id
        message = messages[task_id]
        assert message.startswith(f"{task_id}: request is {KINDS[task_id]}"), message
        assert "not a JSON object (a dict)" in message and "nothing was read or sent" in message, message
    assert result["lookups"] == []  # neither the store's Connection nor the provider's was read
    assert result["submissions"] == 0
    sequences = range(len(REFUSED)) if dag_id == "ijr_refused" else range(NATIVE_FIRST, NATIVE_FIRST + 2)
    assert {results["store"][f"2026-W32-{n}"] for n in sequences} == {"none"}


def test_text_is_never_parsed_and_the_message_says_how_to_pass_a_dict(request_results: dict[str, Any]) -> None:
    messages = failures(scenario(request_results, "requests")["ijr_refused"])
    for task_id in ("text_template", "json_text"):
        assert "render_template_as_native_obj=True" in messages[task_id], messages[task_id]
        assert "never parsed as JSON" in messages[task_id], messages[task_id]
    for task_id in ("none", "omitted"):
        assert "request={} for an empty request" in messages[task_id], messages[task_id]


def test_a_native_dict_and_an_explicit_empty_request_are_paid_for(request_results: dict[str, Any]) -> None:
    """The positive control: the recording backend does see both Connections, and the provider the requests."""
    results = scenario(request_results, "requests")
    result = results["ijr_native_ok"]
    for task_id in ("native_dict", "empty"):
        assert ti(result["run"], task_id)["state"] == "success", result["run"]
    assert {(entry["kind"], entry["id"]) for entry in result["lookups"]} == {
        ("connection", "ijr_store"),
        ("connection", "ijr_provider"),
    }
    assert result["submissions"] == 2
    assert result["requests_sent"] == [{"prompt": "a lighthouse at dusk"}, {}]  # sorted by their JSON
    assert results["store"][f"2026-W32-{OK_FIRST}"] == results["store"][f"2026-W32-{OK_FIRST + 1}"] == "succeeded"


def test_a_decorated_function_that_returns_no_dict_fails_the_first_try(request_results: dict[str, Any]) -> None:
    results = scenario(request_results, "requests")
    result = results["ijr_decorated"]
    for task_id in ("returns_text", "returns_none", "returns_pairs"):
        assert {k: v for k, v in ti(result["run"], task_id).items() if k != "task_id"} == FIRST_TRY_FAILED, task_id
    assert result["lookups"] == []  # its store is a path; the provider's Connection is never read
    assert result["submissions"] == 0
    log = Path(request_results["_log"]).read_text(errors="replace")
    for function, kind in (("returns_text", "str"), ("returns_none", "NoneType"), ("returns_pairs", "list")):
        assert f"{function}: {function}() must return the request as a JSON object (a dict), not {kind}" in log
    assert "not str; text is never parsed as JSON; nothing was sent" in log
    assert "not NoneType; return {} for an empty request; nothing was sent" in log
    sequences = range(DECORATED_FIRST, DECORATED_FIRST + 3)
    assert {results["store"][f"2026-W32-{n}"] for n in sequences} == {"none"}
