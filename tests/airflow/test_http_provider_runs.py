"""The HTTP provider under real ``dag.test()`` runs: no form of the token anywhere, URI connections typed.

Two provider servers in their own processes: one echoes the token in every error answer (401,
404, 409, 422, 5xx, a failed job's error), one ignores idempotency tokens and offers no lookup.
The runs go through the worker (non-deferrable) and the triggerer (deferrable) paths; afterwards
the test searches, for every form of the token (bare, header, URL-encoded, JSON-escaped, base64,
its alphanumeric core): the runner's output (task logs included), every file under the run's
AIRFLOW_HOME (log files, the episode stores' ``state.json``, the metadata database with its XComs
and trigger events), and the exception texts and trigger events the tasks saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from airflow_idempotent_jobs.testing.server import server_connection, server_connection_uri
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import observed, provider_server_process, scenario_home, ti
from tests.paid.leaks import TOKEN, WRONG, leaks

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
PLAIN_TOKEN = "plain-provider-token-4c1d"
#: One bad value per field, as a URI carries it (every extra a string).
BAD_VALUES = {
    "tokens_honoured": "maybe",
    "read_timeout": "nan",
    "headers": '{"Authorization": "Bearer other"}',
    "base_url": "http://127.0.0.1:9/?debug=1",
    "lookup_path": "/jobs/{token}/{oops}",
    "idempotency_header": "",
}


def plain_uri(url: str) -> str:
    """The issue's connection: a URI whose only setting besides the JSON paths is ``tokens_honoured=false``.

    (``server_connection_uri`` also writes numbers and mappings, which a URI must carry as JSON in
    the extra; the base URL goes in the extra too, so that a URI host's port cannot be dropped.)
    """
    extra = {
        "base_url": url,
        "tokens_honoured": "false",
        "ref_path": "job.id",
        "state_path": "job.status",
        "cost_path": "billing.amount",
        "error_path": "error.message",
    }
    return f"idempotent-jobs-http://:{quote(PLAIN_TOKEN, safe='')}@{quote(url, safe='')}?{urlencode(extra)}"


@pytest.fixture(scope="session")
def http_runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(
        airflow_home.home, tmp_path_factory, "http-provider-home", [HERE / "dags" / "http_provider_dags.py"]
    )
    with (
        provider_server_process("--token", TOKEN, "--echo-token", "--polls-to-finish", "1") as echo_url,
        provider_server_process("--token", PLAIN_TOKEN, "--ignore-tokens", "--no-lookup") as plain_url,
    ):
        connections: dict[str, object] = {
            "ijh_echo": server_connection(echo_url, TOKEN),
            "ijh_echo_wrong": server_connection(echo_url, WRONG),
            "ijh_uri_plain": plain_uri(plain_url),
        }
        for field, value in BAD_VALUES.items():
            bad: dict[str, Any] = {"lookup_path": None, field: value}
            connections[f"ijh_bad_{field}"] = server_connection_uri(plain_url, PLAIN_TOKEN, None, **bad)
        env = where.env(
            connections=connections,
            IJH_ECHO_URL=echo_url,
            IJH_ECHO_TOKEN=TOKEN,
            IJH_PLAIN_URL=plain_url,
            IJH_PLAIN_TOKEN=PLAIN_TOKEN,
        )
        assert "tokens_honoured=false" in env["AIRFLOW_CONN_IJH_URI_PLAIN"]
        results = where.run("tests.airflow.http_provider_scenarios", env, timeout=540)
        yield {**results, "_home": where.home}


def texts_under(root: Path) -> dict[str, str]:
    """Every file under ``root`` as text (binary files such as the SQLite database included)."""
    return {str(p.relative_to(root)): p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()}


def test_the_runs_took_the_paths_that_echo_the_token(http_runs: dict[str, Any]) -> None:
    """Positive control: each run met the echoing answers it was meant to, and saw them redacted."""
    worker = scenario(http_runs, "secret_worker")["run"]
    assert ti(worker, "generate")["state"] == "failed" and ti(worker, "generate")["try_number"] == 2
    raised = [o["error"] for o in observed(worker, "raised")]
    assert [e["type"] for e in raised] == ["ProviderOutcomeUnknown", "AirflowFailException"], raised
    assert "HTTP 503" in raised[0]["text"] and "<redacted>" in raised[0]["text"]
    assert "generation failed" in raised[1]["text"] and "<redacted>" in raised[1]["text"]

    deferred = scenario(http_runs, "secret_deferred")["run"]
    assert ti(deferred, "generate")["state"] == "failed" and ti(deferred, "generate")["try_number"] == 2
    events = [o["event"] for o in observed(deferred, "event")]
    assert [e["status"] for e in events] == ["error", "terminal"], events
    assert "HTTP 401" in events[0]["message"] and "<redacted>" in events[0]["message"]
    assert events[1]["state"] == "failed" and "<redacted>" in events[1]["error"]

    wrong = scenario(http_runs, "secret_wrong_token")["run"]
    assert ti(wrong, "generate") == {"task_id": "generate", "map_index": -1, "state": "failed", "try_number": 1}
    (refused,) = scenario(http_runs, "secret_wrong_token")["store"]
    assert "HTTP 401" in refused["submission"]["error"] and "<redacted>" in refused["submission"]["error"]
    assert http_runs["metadata"]["xcom"], "the runs pushed XComs (searched below)"


def test_no_form_of_the_token_anywhere(http_runs: dict[str, Any]) -> None:
    home: Path = http_runs["_home"]
    places = {"runner output (task logs)": Path(http_runs["_log"]).read_text(errors="replace")}
    places.update({f"file {name}": text for name, text in texts_under(home).items()})
    names = ("secret_worker", "secret_deferred", "secret_wrong_token")
    seen = [o for name in names for o in http_runs[name]["run"]["observed"]]
    places["exception texts and trigger events seen by the tasks"] = json.dumps(seen, ensure_ascii=False)
    places["xcoms and next_kwargs"] = json.dumps(http_runs["metadata"])
    assert any(name.startswith("file work/stores/") and "state.json" in name for name in places)
    assert any(name == "file airflow.db" for name in places)
    found = {where: leaks(text, TOKEN, WRONG) for where, text in places.items() if leaks(text, TOKEN, WRONG)}
    assert not found, found


def test_a_uri_saying_tokens_honoured_false_refuses_the_retry_with_one_job(http_runs: dict[str, Any]) -> None:
    result = scenario(http_runs, "uri_lost_answer")
    run = result["run"]
    assert ti(run, "generate") == {"task_id": "generate", "map_index": -1, "state": "failed", "try_number": 1}
    (failure,) = [o["error"] for o in observed(run, "raised")]
    assert "idempotent-jobs reconcile 2026-W32-0" in failure["text"]
    (episode,) = result["store"]
    token = episode["submission"]["token"]
    assert episode["submission"]["state"] == "unknown"
    assert result["provider"]["accepted_per_token"][token] == 1  # "false" read as true made 2 jobs
    assert result["provider"]["submissions_per_token"][token] == 1


def test_a_bad_uri_value_fails_on_the_first_try_naming_the_field(http_runs: dict[str, Any]) -> None:
    result = scenario(http_runs, "uri_bad_values")
    run = result["run"]
    messages = {o["task_id"]: o["error"]["text"] for o in observed(run, "raised")}
    for field in BAD_VALUES:
        task_id = f"bad_{field}"
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}
        assert f": {field}:" in messages[task_id], messages[task_id]
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "none"
    from airflow_idempotent_jobs import open_store
    from airflow_idempotent_jobs.paid import SubmissionLedger

    with open_store(Path(http_runs["_home"]) / "work" / "stores" / "ijh_uri_bad_values") as store:
        token = SubmissionLedger(store).token_for(episode["episode_id"])
    assert result["provider"]["submissions_per_token"].get(token, 0) == 0
