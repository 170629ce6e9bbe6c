"""Metrics through Airflow's own ``Stats``: StatsD, Datadog or OpenTelemetry, as ``[metrics]`` says.

Names (each backend adds its prefix, ``[metrics] statsd_prefix``: ``airflow.`` by default); every
metric carries the tags ``dag_id`` and ``task_id`` where the backend sends tags (DogStatsD,
OpenTelemetry, StatsD with ``statsd_influxdb_enabled``). Plain StatsD drops tags, so what tells
metrics apart is in the name.

- ``idempotent_jobs.allocation.new`` / ``.reused``: counter, one per allocating try; ``reused``
  is a retry, a clear or a backfill that found its run's episode.
- ``idempotent_jobs.submission.<outcome>``: counter, one per try of a paid step that went past an
  already settled submission, by how it ended: ``succeeded``, ``failed`` (the job ended failed,
  or the provider rejected it), ``unknown`` (the submit call's outcome was lost, or only
  reconcile can tell), ``refused`` (budget, approval or another request: nothing sent),
  ``unavailable`` (certainly not sent; retried), ``in_progress`` (another live submitter),
  ``error`` (anything else: store, configuration, a poll timeout). A try that finds the job
  already succeeded or failed counts nothing, so a job's outcome and cost are counted once.
- ``idempotent_jobs.cost``: counter, incremented by the job's cost in provider units (a float)
  by the try that saw the job finish; summed over a week in the metrics backend it is that
  week's spend. (A gauge would be per process: each task is a new process.) The exact figure
  is the store's: ``idempotent-jobs report``.
- ``idempotent_jobs.stuck``: counter, one per try that meets a submission only
  ``idempotent-jobs reconcile`` can settle (``unknown``, or a stale ``submitting`` claim, with a
  provider that neither honours tokens nor offers lookup).

Metrics are best effort: any failure to emit is logged at debug level and never fails a task.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..episode import Episode

__all__ = ["PREFIX", "PaidTry", "allocated", "paid_try"]

log = logging.getLogger(__name__)

PREFIX: Final = "idempotent_jobs"
#: Errors that end a paid try, by class name, and the outcome each one counts as.
_OUTCOMES: Final = {
    "SubmissionStateUnknown": "unknown",
    "ProviderOutcomeUnknown": "unknown",
    "BudgetExceeded": "refused",
    "BudgetUnknowable": "refused",
    "ApprovalRequired": "refused",
    "RequestConflict": "refused",
    "DecisionConflict": "refused",
    "ProviderUnavailable": "unavailable",
    "SubmissionInProgress": "in_progress",
}


def _incr(name: str, tags: dict[str, str], count: float = 1) -> None:
    """``Stats.incr`` that cannot fail the task (Airflow types ``count`` as int; every backend
    sends a float as is, which the cost needs)."""
    try:
        try:
            from airflow.sdk.observability.stats import Stats
        except ImportError:  # pragma: no cover - Airflow before the task SDK had its own Stats
            from airflow.stats import Stats  # type: ignore[attr-defined,no-redef,unused-ignore]
        incr: Callable[..., Any] = Stats.incr
        incr(f"{PREFIX}.{name}", count=count, tags=tags)
    except Exception:
        log.debug("metric %s.%s not sent", PREFIX, name, exc_info=True)


def _tags(context: Any) -> dict[str, str]:
    try:
        ti = context["ti"]
        return {"dag_id": str(ti.dag_id), "task_id": str(ti.task_id)}
    except Exception:
        return {}


def allocated(context: Any, episode: Episode) -> None:
    """Count one allocation: new or reused."""
    _incr("allocation.reused" if episode.reused else "allocation.new", _tags(context))


class PaidTry:
    """What one try of a paid step saw: `loaded` the episode as it found it, `seen` as it ends."""

    def __init__(self) -> None:
        self.settled_before = False
        self.episode: Episode | None = None

    def loaded(self, episode: Episode) -> Episode:
        self.settled_before = episode.submission.state.terminal
        return episode

    def seen(self, episode: Episode) -> Episode:
        self.episode = episode
        return episode


@contextlib.contextmanager
def paid_try(context: Any) -> Iterator[PaidTry]:
    """Count how the paid try inside the ``with`` ended (see the module's names); a deferral
    counts nothing (the resumed task counts the outcome)."""
    attempt = PaidTry()
    try:
        yield attempt
    except BaseException as exc:
        if type(exc).__name__ != "TaskDeferred":
            _count(context, attempt, exc)
        raise
    else:
        _count(context, attempt, None)


def _count(context: Any, attempt: PaidTry, exc: BaseException | None) -> None:
    if attempt.settled_before:
        return  # counted by the try that saw it settle
    try:
        tags = _tags(context)
        episode = attempt.episode
        if episode is not None and episode.submission.state.terminal:
            sub = episode.submission
            _incr(f"submission.{sub.state.value}", tags)
            if sub.cost is not None:
                _incr("cost", tags, round(float(sub.cost), 9))
            return
        if exc is None:
            return
        kinds = [klass.__name__ for klass in type(_package_error(exc)).__mro__]
        outcome = next((_OUTCOMES[kind] for kind in kinds if kind in _OUTCOMES), "error")
        _incr(f"submission.{outcome}", tags)
        if "SubmissionStateUnknown" in kinds:
            _incr("stuck", tags)
    except Exception:
        log.debug("paid metrics not sent", exc_info=True)


def _package_error(exc: BaseException) -> BaseException | None:
    """This package's error behind ``exc`` (`task_errors` raises AirflowFailException from it)."""
    from ..errors import IdempotentJobsError

    seen: BaseException | None = exc
    for _ in range(8):  # a short chain; bounded against a cycle
        if seen is None:
            return None
        if isinstance(seen, IdempotentJobsError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
