"""The weekly budget: what each submission counts against it, and amounts that can be trusted.

A cost is a finite number >= 0 (`episode.cost_problem`): NaN compares false with every budget and a
negative cost lowers the week's spend, so neither ever counts. A submission whose provider reported
something else (``cost_anomaly``) counts at its estimate; with no estimate the week's spend cannot be
known and a budget refuses every new submission of the week (`BudgetUnknowable`): fail closed.
"""

from __future__ import annotations

from ..episode import Episode, Submission, SubmissionState, amount_problem
from ..errors import BudgetExceeded, BudgetUnknowable, InvalidConfiguration

__all__ = ["check_budget", "checked_amount", "committed_cost"]

_S = SubmissionState


def checked_amount(field: str, value: object) -> float | None:
    """``value`` as a budget or estimate a person gave (None, or a finite number >= 0 that is not
    ``-0.0``: `episode.amount_problem`); else `InvalidConfiguration` naming ``field``."""
    if value is None:
        return None
    problem = amount_problem(value)
    if problem:
        raise InvalidConfiguration("paid submission settings", field, f"{value!r:.40} is {problem}")
    return float(value)  # type: ignore[arg-type]  # amount_problem proved it a number


def committed_cost(sub: Submission) -> float | None:
    """What a submission counts against the budget: its known cost, else its estimate.

    None when it cannot be known: the provider reported something that is no cost and there is no
    estimate to count instead.
    """
    if sub.state is _S.NONE:
        return 0.0
    if sub.cost is not None:
        return sub.cost
    if sub.cost_anomaly is not None:  # it may have been billed, failed or not
        return sub.estimated_cost
    if sub.state is _S.FAILED:
        return 0.0
    return sub.estimated_cost or 0.0


def check_budget(ep: Episode, week: list[Episode], budget: float | None, estimated_cost: float | None) -> None:
    """`BudgetExceeded` if submitting ``ep`` could pass ``budget`` given the rest of its ``week``."""
    if budget is None:
        return
    committed = {other.episode_id: committed_cost(other.submission) for other in week}
    unknown = sorted(eid for eid, cost in committed.items() if cost is None)
    if unknown:  # fail closed: an anomalous cost without an estimate could be anything
        raise BudgetUnknowable(ep.episode_id, ep.week_id, budget, unknown)
    spent = sum(cost for cost in committed.values() if cost is not None)
    requested = estimated_cost or 0.0
    # Without an estimate, a week with nothing left is refused; with one, the sum must fit.
    if spent + requested > budget or (requested == 0.0 and spent >= budget):
        raise BudgetExceeded(ep.episode_id, ep.week_id, budget, spent, requested)
