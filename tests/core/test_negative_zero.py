"""A negative zero given by a person (a budget, an estimate, a lock timeout) is refused where it is read.

``-0.0`` passes every comparison a zero passes (``-0.0 >= 0``), so the checks let it through and it
came back printed as "-0.00" or "-0s". A person who typed a minus sign meant something the number
does not say (a file store reads a negative lock timeout as "wait for ever"): one line naming the
parameter. A cost a provider reports is not user input: `episode.cost_problem` still takes -0.0.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from airflow_idempotent_jobs import InvalidIdentifier, open_store
from airflow_idempotent_jobs.episode import cost_problem
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.operations import week_view
from airflow_idempotent_jobs.paid.budget import checked_amount
from airflow_idempotent_jobs.stores import FileEpisodeStore
from tests.clirun import run_main

NEGATIVE_ZEROS = [-0.0, float("-0"), -0.0 * 1e300]


@pytest.mark.parametrize("value", NEGATIVE_ZEROS)
def test_a_budget_or_an_estimate_of_minus_zero_is_refused_naming_it(value: float) -> None:
    for field in ("weekly_budget", "estimated_cost"):
        with pytest.raises(InvalidConfiguration, match=rf"{field}: -0\.0 is a negative zero"):
            checked_amount(field, value)
    assert checked_amount("weekly_budget", 0.0) == 0.0 and checked_amount("weekly_budget", 0) == 0.0


def test_the_read_model_refuses_a_budget_of_minus_zero(tmp_path: Path) -> None:
    with open_store(tmp_path / "store") as store:
        store.allocate("2026-W32", "k")
        now = dt.datetime(2026, 8, 5, tzinfo=dt.timezone.utc)
        with pytest.raises(InvalidConfiguration, match=r"weekly_budget: -0\.0 is a negative zero"):
            week_view(store, "2026-W32", budget=-0.0, now=now)
        assert week_view(store, "2026-W32", budget=0.0, now=now)["budget"] == 0.0


def test_a_provider_reported_cost_of_minus_zero_is_still_a_cost() -> None:
    """Not user input: the provider's word is kept as it is (-0.0 == 0 in every budget sum)."""
    assert cost_problem(-0.0) is None


@pytest.mark.parametrize("value", NEGATIVE_ZEROS)
def test_a_file_store_lock_timeout_of_minus_zero_is_refused(tmp_path: Path, value: float) -> None:
    with pytest.raises(InvalidIdentifier, match=r"invalid lock timeout -0\.0: .*negative zero"):
        FileEpisodeStore(tmp_path / "store", lock_timeout=value)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("given", ["url", "argument"])
def test_a_postgres_lock_timeout_of_minus_zero_is_refused_before_connecting(given: str) -> None:
    url = "postgresql://nobody@127.0.0.1:1/never"  # nothing listens there: refused before any connection
    with pytest.raises(InvalidIdentifier, match=r"invalid lock timeout .*negative zero"):
        if given == "url":
            open_store(url + "?lock_timeout=-0")
        else:
            open_store(url, lock_timeout=-0.0)


def test_the_report_and_lock_timeout_options_refuse_minus_zero_in_one_line(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    for args, name in (
        (["--lock-timeout", "-0", "list"], "--lock-timeout"),
        (["--lock-timeout=-0.0", "list"], "--lock-timeout"),
        (["report", "--budget", "-0"], "--budget"),
    ):
        done = run_main("--store", store, *args)
        assert done.code == 2, done
        line = done.error_line()
        assert name in line and "-0" in line, line
    assert not Path(store).exists()
