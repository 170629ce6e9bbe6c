"""A negative zero in the deployment's ``[idempotent_jobs] weekly_budget`` is refused, naming the setting.

The page showed it as a budget of "-0.00". (The operators' own amounts: test_approval_definitions.py
and the ``paid_bad_amounts`` scenario of test_paid_runs.py; the CLI and stores: tests/core/test_negative_zero.py.)
"""

from __future__ import annotations

import pytest

from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.plugins.page_settings import weekly_budget

pytestmark = pytest.mark.airflow

SETTING = "AIRFLOW__IDEMPOTENT_JOBS__WEEKLY_BUDGET"


@pytest.mark.parametrize("text", ["-0", "-0.0", "-0e5", " -0.000 "])
def test_the_page_refuses_a_weekly_budget_of_minus_zero(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(SETTING, text)
    with pytest.raises(InvalidConfiguration) as caught:
        weekly_budget()
    message = str(caught.value)
    assert f"[idempotent_jobs] weekly_budget ({SETTING})" in message and "negative zero" in message, message


@pytest.mark.parametrize(("text", "value"), [("0", 0.0), ("+0", 0.0), ("12.5", 12.5)])
def test_the_page_takes_zero_and_positive_budgets(monkeypatch: pytest.MonkeyPatch, text: str, value: float) -> None:
    monkeypatch.setenv(SETTING, text)
    assert weekly_budget() == value
