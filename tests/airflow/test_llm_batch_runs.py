"""Our LLM batch providers in real Airflow: ``dag.test()`` runs against local doubles of OpenAI's Batch
API and Anthropic's Message Batches, each double in its own OS process, the real SDKs pointed at them.

One runner process per vendor (``llm_batch_scenarios.py``). The paid tasks name only a connection of
the vendor's own type (``openai_default``, ``anthropic_default``): resolution picks our hook. For
each vendor, deferrable and not, after one lost create answer, three (three episodes of one run),
and a worker SIGKILLed while the create answer was on its way: exactly one billed batch per
episode (the double's own count), the episode records it (succeeded, remote ref = that batch) and
its cost equals the usage the double reported, priced here by hand.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.hooks.paid_provider import build_provider, hook_class_path, resolve_provider_hook
from tests.airflow.conftest import AirflowHome
from tests.airflow.dags_llm_batch.llm_batch_dags import PRICES
from tests.airflow.scenario_process import REPO, observed, scenario_home, ti
from tests.server_process import server_process

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

HERE = Path(__file__).resolve().parent
VENDORS = ("openai", "anthropic")
MODES = ("worker", "deferred")
KEYS = {"openai": "sk-local-llm-batch-5e1f0a", "anthropic": "sk-ant-local-llm-batch-9c2d7b"}


def double(vendor: str) -> Any:
    """The vendor's double in its own process; Anthropic's batches end 2 s after creation (on any read)."""
    if vendor == "openai":
        return server_process("airflow_idempotent_jobs.testing.openai_api", "--api-key", KEYS[vendor])
    return server_process(
        "airflow_idempotent_jobs.testing.anthropic_api", "--key", KEYS[vendor], "--seconds-to-finish", "2"
    )


def connection(vendor: str, url: str) -> dict[str, Any]:
    """The vendor provider's own connection form, plus ``batch_prices``."""
    return {
        "conn_type": vendor,
        "host": url + "/v1" if vendor == "openai" else url,
        "password": KEYS[vendor],
        "extra": {"batch_prices": PRICES[vendor]},
    }


@pytest.fixture(scope="module", params=VENDORS)
def runs(
    request: pytest.FixtureRequest, airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    vendor: str = request.param
    sources = [HERE / "dags_llm_batch", REPO / "example_dags" / f"weekly_llm_batch_{vendor}.py"]
    where = scenario_home(airflow_home.home, tmp_path_factory, f"llm-batch-{vendor}", sources)
    with double(vendor) as api:
        env = where.env(
            connections={f"{vendor}_default": connection(vendor, api.url)},
            IJL_VENDOR=vendor,
            IJL_API_URL=api.url,
            IJL_API_KEY=KEYS[vendor],
            IJL_JSONL=str(where.work / "week.jsonl"),
        )
        results = where.run("tests.airflow.llm_batch_scenarios", env, timeout=840)
    results["vendor"] = vendor
    yield results


def part(runs: dict[str, Any], name: str) -> Any:
    data = runs[name]
    assert "error" not in data, data["error"]
    return data


def priced_by_hand(vendor: str, lines: list[str]) -> float:
    """What the usage lines the double reported cost at the connection's prices (vendor docs' rules)."""
    total = 0.0
    for text in lines:
        line = json.loads(text)
        if vendor == "openai":
            body = line["response"]["body"]
            price, usage = PRICES[vendor][body["model"]], body["usage"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]  # part of prompt_tokens
            total += (usage["prompt_tokens"] - cached) * price["input"] + cached * price["cached_input"]
            total += usage["completion_tokens"] * price["output"]
        else:
            message = line["result"]["message"]
            price, usage = PRICES[vendor][message["model"]], message["usage"]
            total += usage["input_tokens"] * price["input"] + usage["output_tokens"] * price["output"]
            total += usage["cache_creation_input_tokens"] * price["cache_write"]
            total += usage["cache_read_input_tokens"] * price["cached_input"]
    assert lines, "no usage reported"
    return total / 1_000_000


def paid_once(vendor: str, data: dict[str, Any], episodes: int = 1) -> list[dict[str, Any]]:
    """Each episode: succeeded, one billed batch, the batch recorded, its cost the double's usage priced."""
    assert len(data["store"]) == episodes, data["store"]
    for episode in data["store"]:
        sub = episode["submission"]
        billed = data["billed"][episode["episode_id"]]
        assert billed["count"] == 1, (episode["episode_id"], billed)
        (batch_id,) = billed["ids"]
        assert (sub["state"], sub["remote_ref"]) == ("succeeded", batch_id), sub
        assert sub["cost"] == pytest.approx(priced_by_hand(vendor, billed["usage_lines"][batch_id]), rel=1e-9)
        assert 0 < sub["cost"] < sub["estimated_cost"], "the estimate is the worst case, above what was used"
    return list(data["store"])


def notes(episode: dict[str, Any]) -> list[str]:
    return [step["note"] for step in episode["submission"]["history"]]


@pytest.mark.parametrize("mode", MODES)
def test_one_lost_create_answer_bills_one_batch_and_records_it(runs: dict[str, Any], mode: str) -> None:
    vendor, data = runs["vendor"], part(runs, "one_lost_answer")[mode]
    run = data["run"]
    assert run["state"] == "success", run
    (episode,) = paid_once(vendor, data)
    assert "found by token lookup" in notes(episode)
    tries = observed(run, "failed", "pay")
    assert tries and all(t["error"] == "ProviderOutcomeUnknown" for t in tries), tries
    if vendor == "openai":
        assert ti(run, "pay")["try_number"] == 2  # try 2 found the batch by listing and adopted it
    else:  # the batch still ran: tries failed, paying nothing, until it ended, then adopted it
        assert ti(run, "pay")["try_number"] >= 3
        assert any("cannot be ruled out yet" in t["message"] for t in tries), tries
    (seen,) = observed(run, "paid_xcoms", "report")
    assert seen["xcoms"]["remote_ref"] == episode["submission"]["remote_ref"]
    assert seen["xcoms"]["cost"] == episode["submission"]["cost"]


@pytest.mark.parametrize("mode", MODES)
def test_three_lost_create_answers_bill_one_batch_per_episode(runs: dict[str, Any], mode: str) -> None:
    vendor, data = runs["vendor"], part(runs, "three_lost_answers")[mode]
    assert data["run"]["state"] == "success", data["run"]
    assert data["faults_left"] == 0, "each of the three create answers was lost"
    episodes = paid_once(vendor, data, episodes=3)
    assert len({e["submission"]["remote_ref"] for e in episodes}) == 3
    for episode in episodes:
        assert "found by token lookup" in notes(episode)
    for index in range(3):
        assert ti(data["run"], "pay", index)["try_number"] >= 2


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_killed_after_the_create_call_bills_one_batch(runs: dict[str, Any], mode: str) -> None:
    vendor, data = runs["vendor"], part(runs, "kill")[mode]
    assert data["created_before_kill"] == 1 and data["killed_by"] == signal.SIGKILL
    (held,) = data["store_after_kill"]
    assert held["submission"]["state"] == "submitting", "killed between the intent and the answer"
    assert data["run"]["state"] == "success", data["run"]
    (episode,) = paid_once(vendor, data)
    assert episode["episode_id"] == held["episode_id"]
    assert "found by token lookup" in notes(episode)


def test_bad_requests_and_worst_cases_over_budget_are_refused_before_sending(runs: dict[str, Any]) -> None:
    data = part(runs, "refused")
    assert data["sent"] == dict.fromkeys(data["sent"], 0), data["sent"]  # not even a free upload
    expected = {
        "unpriced": "'no-such-model' is not in the price table",
        "unbounded": "its output, and so the batch's worst case, has no bound"
        if runs["vendor"] == "openai"
        else "max_tokens: None is not an integer >= 1",
        "over_budget": "weekly budget 0.0001 for 2026-W32 would be exceeded",
    }
    for task_id, said in expected.items():
        assert ti(data["run"], task_id)["state"] == "failed"
        assert ti(data["run"], task_id)["try_number"] == 1, "no retry"
        (failure,) = observed(data["run"], "failed", task_id)
        assert said in failure["message"] and "\n" not in failure["message"], failure
    for episode in data["store"]:
        assert episode["submission"]["state"] == "none", episode


@pytest.mark.parametrize("runs", ["openai"], indirect=True)  # a prepared JSONL file is OpenAI's form
def test_a_prepared_file_binds_the_episode_to_its_bytes(runs: dict[str, Any]) -> None:
    assert runs["vendor"] == "openai"
    data = part(runs, "prepared_file")
    assert ti(data["lost"], "pay")["state"] == "failed"  # no retries: the create answer was lost
    changed = data["changed"]
    assert ti(changed, "pay")["state"] == "failed" and ti(changed, "pay")["try_number"] == 1
    assert (data["uploads_while_changed"], data["submissions_while_changed"]) == (0, 0)
    first, other, again = _prepared(data)
    assert first == again != other
    log = Path(runs["_log"]).read_text(errors="replace")
    assert "its paid submission was made for request sha256:" in log and "RequestConflict" in log
    assert data["run"]["state"] == "success"
    (episode,) = paid_once("openai", data)
    assert "found by token lookup" in notes(episode)


def _prepared(data: dict[str, Any]) -> list[str]:
    return [o["sha256"] for run in ("lost", "changed", "run") for o in data[run]["observed"] if o["kind"] == "prepared"]


def test_the_example_dag_runs_as_shipped(runs: dict[str, Any]) -> None:
    vendor, data = runs["vendor"], part(runs, "example")
    run = data["run"]
    assert run["state"] == "success", run
    assert [ti(run, t)["state"] for t in ("allocate", "batch", "report")] == ["success"] * 3
    (episode,) = paid_once(vendor, data)
    assert episode["episode_id"] == "2026-W37-0"  # Monday 2026-09-07 06:00 Berlin


# -- resolution, in this process (no run needed) ----------------------------------------------------
@pytest.mark.parametrize("vendor", VENDORS)
def test_a_vendors_own_connection_type_resolves_to_our_hook(monkeypatch: pytest.MonkeyPatch, vendor: str) -> None:
    conn = connection(vendor, "http://127.0.0.1:9")
    monkeypatch.setenv(f"AIRFLOW_CONN_{vendor.upper()}_DEFAULT", json.dumps(conn))
    hook = resolve_provider_hook(f"{vendor}_default")
    assert hook_class_path(hook) == f"airflow_idempotent_jobs.vendors.{vendor}.hook.{type(hook).__name__}"
    assert hook.provider_conn_id == f"{vendor}_default"
    provider = build_provider(hook)  # builds a client, sends nothing (the port 9 answers nobody)
    assert type(provider).__name__ == ("OpenAIBatchProvider" if vendor == "openai" else "AnthropicBatchProvider")
    assert sorted(provider.prices.models) == sorted(PRICES[vendor])  # type: ignore[attr-defined]


def test_provider_hook_still_wins_over_a_vendors_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_OPENAI_DEFAULT", json.dumps(connection("openai", "http://127.0.0.1:9")))
    path = "airflow_idempotent_jobs.hooks.http_provider.HttpPaidProviderHook"
    assert hook_class_path(resolve_provider_hook("openai_default", path)) == path


def test_a_vendor_connection_that_cannot_work_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {**connection("anthropic", "http://127.0.0.1:9"), "extra": {}}  # no batch_prices
    monkeypatch.setenv("AIRFLOW_CONN_ANTHROPIC_DEFAULT", json.dumps(conn))
    with pytest.raises(InvalidConfiguration) as caught:
        build_provider(resolve_provider_hook("anthropic_default"))
    assert "batch_prices" in str(caught.value) and "\n" not in str(caught.value) and not caught.value.retryable
    assert KEYS["anthropic"] not in str(caught.value)
