"""A status answer whose cost is no number at all still settles the job: the cost is an anomaly.

Providers written with Python's ``json`` emit literal ``NaN``/``Infinity``; others send text or an
object where the cost belongs. Once, such an answer was "unreadable" (strict JSON) or a
`ProviderError`: the job had succeeded and was paid for, yet every poll failed until the task ran
out of time and retries. Now the job's state and result are kept and the cost is recorded as an
anomaly, as for a negative cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore, SubmissionState
from airflow_idempotent_jobs.paid import SubmissionLedger, wait_for_terminal
from tests.paid.raw_provider import RawProvider
from tests.paid.support import run_cli

REQUEST = {"prompt": "weekly video"}


@pytest.fixture
def api() -> Iterator[RawProvider]:
    with RawProvider() as running:
        yield running


@pytest.mark.parametrize(
    "raw",
    ["NaN", "Infinity", "-Infinity", "1e999", "9" * 5000, '"abc"', "true", '{"amount": 1}', "[2.5]"],
)
def test_a_cost_that_is_no_number_settles_the_job_with_an_anomaly(
    file_store: EpisodeStore, api: RawProvider, raw: str
) -> None:
    api.cost = raw
    ledger = SubmissionLedger(file_store)
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger.submit(eid, api.provider(), REQUEST, estimated_cost=1.5)
    episode = wait_for_terminal(ledger, eid, api.provider(), timeout=5, initial_delay=0.01)
    sub = episode.submission
    assert sub.state is SubmissionState.SUCCEEDED and sub.remote_ref == "job-0"
    assert sub.result == {"url": "https://media.invalid/x.mp4"}
    assert sub.cost is None and sub.cost_anomaly is not None
    assert api.submissions == 1


def test_a_non_finite_number_elsewhere_in_the_answer_is_kept_out_of_the_result(
    file_store: EpisodeStore, api: RawProvider
) -> None:
    api.result = '{"score": NaN, "url": "https://media.invalid/x.mp4"}'
    ledger = SubmissionLedger(file_store)
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger.submit(eid, api.provider(), REQUEST)
    sub = wait_for_terminal(ledger, eid, api.provider(), timeout=5, initial_delay=0.01).submission
    assert sub.state is SubmissionState.SUCCEEDED and sub.cost == 2.5
    assert sub.result is None and sub.result_omitted is not None  # a record never holds NaN


def test_list_marks_a_cost_anomaly_instead_of_showing_no_cost(
    file_store: EpisodeStore, api: RawProvider, tmp_path: Path
) -> None:
    api.cost = "NaN"
    ledger = SubmissionLedger(file_store)
    eid = file_store.allocate("2026-W32", "k").episode_id
    ledger.submit(eid, api.provider(), REQUEST, estimated_cost=1.5)
    wait_for_terminal(ledger, eid, api.provider(), timeout=5, initial_delay=0.01)
    listed = run_cli("--store", str(file_store.location), "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[:2]
    cost = row[header.index("COST") :].split()[0]
    assert cost == "?", listed.stdout  # blank would read as "not billed yet"
    assert "cost anomaly" in listed.stdout
