"""`week_rows`: the page's filters, search, sort and pages over a week's episodes (no store needed)."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.episode import Approval, Decision, Episode, EpisodeStatus, Submission, SubmissionState
from airflow_idempotent_jobs.errors import InvalidIdentifier
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.task_key import Owner
from airflow_idempotent_jobs.week_rows import MAX_PER_PAGE, RowQuery, select

WEEK = WeekId(2026, 32)


def _episodes(count: int) -> list[Episode]:
    out = []
    for n in range(count):
        dag = "alpha" if n % 2 else "beta"
        ep = new_episode(WEEK, n, f"airflow:{dag}:allocate:manual__{n}", None)
        ep = dataclasses.replace(ep, metadata={"allocated_by": Owner(dag, "allocate", f"manual__{n}", None).to_dict()})
        if n % 3 == 0:
            sub = Submission(
                state=SubmissionState.SUCCEEDED, token=f"aij-tok-{n:04d}", remote_ref=f"job-{n:04d}", cost=float(n % 7)
            )
            ep = dataclasses.replace(ep, status=EpisodeStatus.SUCCEEDED, submission=sub)
        if n % 5 == 0:
            ep = dataclasses.replace(ep, approval=Approval(Decision.APPROVED, "carol", "2026-08-03T00:00:00+00:00"))
        out.append(ep)
    return out


def test_filters_combine_and_the_info_says_how_many_match() -> None:
    eps = _episodes(60)
    page, info = select(eps, RowQuery.parse({"status": "succeeded", "dag": "alpha", "decision": "approved"}))
    want = [e.episode_id for e in eps if e.sequence % 3 == 0 and e.sequence % 2 and e.sequence % 5 == 0]
    assert [e.episode_id for e in page] == want
    assert (info["total"], info["matching"], info["pages"], info["dags"]) == (60, len(want), 1, ["alpha", "beta"])


@pytest.mark.parametrize("needle", ["aij-tok-0009", "JOB-0009", "manual__9", "2026-W32-9"])
def test_search_finds_by_token_remote_ref_key_or_id_whatever_the_case(needle: str) -> None:
    page, info = select(_episodes(12), RowQuery.parse({"q": needle}))
    assert "2026-W32-9" in [e.episode_id for e in page], (needle, info)


def test_sort_by_cost_descending_puts_episodes_without_a_cost_last() -> None:
    page, _ = select(_episodes(12), RowQuery.parse({"sort": "cost", "order": "desc", "per_page": "12"}))
    costs = [e.submission.cost for e in page]
    known = [c for c in costs if c is not None]
    assert known == sorted(known, reverse=True) and costs[len(known) :] == [None] * (12 - len(known))


def test_episode_ids_sort_by_number_not_text_and_pages_cover_the_week_once() -> None:
    eps = _episodes(250)
    seen: list[str] = []
    for page_number in (1, 2, 3):
        page, info = select(eps, RowQuery.parse({"page": str(page_number)}))
        seen += [e.episode_id for e in page]
        assert info["pages"] == 3
    assert seen == [f"2026-W32-{n}" for n in range(250)]
    assert select(eps, RowQuery.parse({"page": "4"}))[0] == []


@pytest.mark.parametrize(
    "params",
    [
        {"status": "paid"},
        {"sort": "token"},
        {"order": "up"},
        {"page": "0"},
        {"page": "-1"},
        {"page": "1e3"},
        {"per_page": str(MAX_PER_PAGE + 1)},
        {"q": "x\u202ey"},
        {"q": "x" * 201},
        {"limit": "10"},
    ],
)
def test_bad_query_values_are_refused_naming_them(params: dict[str, str]) -> None:
    with pytest.raises(InvalidIdentifier, match=next(iter(params)) if "limit" not in params else "query parameter"):
        RowQuery.parse(params)
