"""A cost is a finite number >= 0: anything else a provider reports is an anomaly, never a cost.

Against a real HTTP job API (`RawProvider`) whose status answers carry the cost as raw JSON text,
read by the real `HttpPaidProvider`. NaN compares false with every budget and a negative cost lowers
the week's spend: both once let submissions through a budget (7 extra through a budget of 5).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import BudgetExceeded, EpisodeStore, SubmissionState
from airflow_idempotent_jobs.errors import BudgetUnknowable, InvalidConfiguration
from airflow_idempotent_jobs.paid import SubmissionLedger, wait_for_terminal
from tests.backends import FileBackend
from tests.paid.raw_provider import RawProvider
from tests.paid.support import run_cli

REQUEST = {"prompt": "weekly video"}
#: Raw JSON text of ``billing.amount`` -> what it reads as (literal NaN/Infinity/1e999 numbers and
#: costs that are no number at all: tests/paid/test_unreadable_costs.py).
NOT_A_COST = {'"NaN"': "nan", "-5": "-5", '"1e999"': "inf", '"-Infinity"': "-inf"}


@pytest.fixture
def api() -> Iterator[RawProvider]:
    with RawProvider() as running:
        yield running


def _pay(
    store: EpisodeStore, ledger: SubmissionLedger, api: RawProvider, key: str, estimated_cost: float | None = None
) -> str:
    eid = store.allocate("2026-W32", key).episode_id
    ledger.submit(eid, api.provider(), REQUEST, estimated_cost=estimated_cost)
    wait_for_terminal(ledger, eid, api.provider(), timeout=10, initial_delay=0.01)
    return eid


@pytest.mark.parametrize("raw", ['"NaN"', "-5", '"1e999"', '"-Infinity"'])
def test_a_cost_that_is_no_cost_is_an_anomaly_and_the_job_is_kept(
    file_store: EpisodeStore, api: RawProvider, raw: str, tmp_path: Path
) -> None:
    api.cost = raw
    ledger = SubmissionLedger(file_store)
    eid = _pay(file_store, ledger, api, "k", estimated_cost=1.5)
    sub = file_store.get(eid).submission
    assert sub.state is SubmissionState.SUCCEEDED and sub.remote_ref == "job-0"
    assert sub.result == {"url": "https://media.invalid/x.mp4"}
    assert sub.cost is None, "never recorded as the cost"
    assert sub.cost_anomaly is not None and "provider reported cost" in sub.cost_anomaly
    assert NOT_A_COST[raw] in sub.cost_anomaly
    # The record stays strict JSON: every reader (and `list --json`) can read it.
    record = FileBackend(tmp_path / "store").state_path(eid).read_text()
    json.loads(record, parse_constant=lambda word: pytest.fail(f"{word} in the record"))
    listed = run_cli("--store", str(tmp_path / "store"), "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    assert (
        json.loads(line, parse_constant=lambda word: pytest.fail(f"{word} in list --json"))["submission"]["cost"]
        is None
    )
    checked = run_cli("--store", str(tmp_path / "store"), "check")
    assert checked.returncode == 1
    assert f"{eid}" in checked.stdout + checked.stderr and "cost anomaly" in checked.stdout + checked.stderr


def test_a_huge_finite_cost_is_a_cost(file_store: EpisodeStore, api: RawProvider) -> None:
    api.cost = "1e308"
    eid = _pay(file_store, SubmissionLedger(file_store), api, "k")
    sub = file_store.get(eid).submission
    assert sub.cost == 1e308 and sub.cost_anomaly is None


@pytest.mark.parametrize("raw", ['"NaN"', "-5"])
def test_anomalies_count_against_the_budget_at_their_estimate(
    file_store: EpisodeStore, api: RawProvider, raw: str
) -> None:
    """Budget 5, estimate 1 each: exactly 5 submissions go through, whatever the provider reports."""
    api.cost = raw
    ledger = SubmissionLedger(file_store, weekly_budget=5.0)
    for n in range(5):
        _pay(file_store, ledger, api, f"k{n}", estimated_cost=1.0)
    extra = file_store.allocate("2026-W32", "extra").episode_id
    with pytest.raises(BudgetExceeded) as refused:
        ledger.submit(extra, api.provider(), REQUEST, estimated_cost=1.0)
    assert refused.value.spent == 5.0
    assert api.submissions == 5


def test_an_anomaly_without_an_estimate_refuses_the_week(file_store: EpisodeStore, api: RawProvider) -> None:
    api.cost = '"NaN"'
    ledger = SubmissionLedger(file_store, weekly_budget=5.0)
    first = _pay(file_store, ledger, api, "first")
    second = file_store.allocate("2026-W32", "second").episode_id
    with pytest.raises(BudgetUnknowable, match=f"no valid cost for {first}") as refused:
        ledger.submit(second, api.provider(), REQUEST, estimated_cost=0.5)
    assert refused.value.exit_code == 2 and not refused.value.retryable
    assert api.submissions == 1
    # Another week is not affected; without a budget nothing is refused.
    other = file_store.allocate("2026-W33", "other").episode_id
    assert ledger.submit(other, api.provider(), REQUEST).submission.state is SubmissionState.ACCEPTED
    assert SubmissionLedger(file_store).submit(second, api.provider(), REQUEST).submission.remote_ref


def test_a_huge_cost_spends_the_whole_budget(file_store: EpisodeStore, api: RawProvider) -> None:
    api.cost = "1e308"
    ledger = SubmissionLedger(file_store, weekly_budget=5.0)
    _pay(file_store, ledger, api, "a")
    _pay(file_store, SubmissionLedger(file_store), api, "b")  # no budget: the sum overflows to inf
    late = file_store.allocate("2026-W32", "late").episode_id
    with pytest.raises(BudgetExceeded):
        ledger.submit(late, api.provider(), REQUEST, estimated_cost=0.1)


@pytest.mark.parametrize("value", [math.nan, -1.0, math.inf, -math.inf, True, "5"])
@pytest.mark.parametrize("field", ["weekly_budget", "estimated_cost"])
def test_a_budget_or_estimate_that_is_no_amount_is_bad_configuration(
    file_store: EpisodeStore, api: RawProvider, field: str, value: object
) -> None:
    eid = file_store.allocate("2026-W32", "k").episode_id
    before = file_store.get(eid)
    with pytest.raises(InvalidConfiguration, match=field) as refused:
        if field == "weekly_budget":
            SubmissionLedger(file_store, weekly_budget=value)  # type: ignore[arg-type]
        else:
            SubmissionLedger(file_store).submit(eid, api.provider(), REQUEST, estimated_cost=value)  # type: ignore[arg-type]
    assert refused.value.exit_code == 2 and not refused.value.retryable
    assert file_store.get(eid) == before and api.submissions == 0


def test_a_later_valid_cost_replaces_nothing_it_should_not(file_store: EpisodeStore, api: RawProvider) -> None:
    """A pending answer with a NaN cost, then the final one with a real cost: the cost is the real one,
    the anomaly stays on record for `check`."""
    from airflow_idempotent_jobs.paid import RemoteState, RemoteStatus

    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger = SubmissionLedger(file_store)
    ledger.submit(eid, api.provider(), REQUEST)
    ledger.record_status(eid, RemoteStatus(RemoteState.RUNNING, cost=math.nan))
    running = file_store.get(eid).submission
    assert running.cost is None and running.cost_anomaly and running.remote_state == "running"
    done = ledger.record_status(eid, RemoteStatus(RemoteState.SUCCEEDED, cost=2.0)).submission
    assert done.cost == 2.0 and done.cost_anomaly == running.cost_anomaly
