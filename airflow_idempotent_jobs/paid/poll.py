"""Blocking polling: drive an accepted submission to ``succeeded`` or ``failed``.

The Airflow layer has a deferrable version (`PaidJobTrigger`, on the provider's ``astatus`` or ``status``); this one is
for plain scripts, the CLI and non-deferred tasks.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..episode import Episode, SubmissionState
from ..errors import IllegalTransition, PollTimeout, ProviderOutcomeUnknown, ProviderUnavailable
from ..identity import EpisodeId
from ..stores.base import EpisodeLike
from .backoff import doubling
from .ledger import SubmissionLedger
from .provider import PaidProvider
from .results import clean_text, redacting, redactor

__all__ = ["wait_for_terminal"]


def wait_for_terminal(
    ledger: SubmissionLedger,
    episode_id: EpisodeLike,
    provider: PaidProvider,
    *,
    timeout: float,
    initial_delay: float = 1.0,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Episode:
    """Poll ``provider.status`` and record each answer until the submission is terminal.

    The delay doubles from ``initial_delay`` up to ``max_delay``; a poll that fails in transit
    (unavailable, outcome unknown: a status call is read-only) is retried the same way. Returns
    the terminal episode; raises `PollTimeout` after ``timeout`` seconds, and `IllegalTransition`
    if the submission is not ``accepted`` (nothing to poll).
    """
    eid = str(EpisodeId.parse(episode_id))
    redact = redactor(provider)
    deadline = monotonic() + timeout
    delays = doubling(initial_delay, max_delay)
    last_error: str | None = None
    while True:
        episode = ledger.store.get(eid)
        sub = episode.submission
        if sub.state.terminal:
            return episode
        if sub.state is not SubmissionState.ACCEPTED or sub.remote_ref is None:
            raise IllegalTransition(eid, sub.state.value, "polled (only an accepted submission can be polled)")
        try:
            with redacting(provider):  # what it raises (a 401, a 404) reaches the task's log
                status = provider.status(sub.remote_ref)
        except (ProviderUnavailable, ProviderOutcomeUnknown) as exc:
            last_error = clean_text(str(exc), redact)
        else:
            last_error = None
            episode = ledger.record_status(eid, status, redact=redact)
            if episode.submission.state.terminal:
                return episode
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise PollTimeout(eid, timeout, episode.submission.remote_state, last_error)
        sleep(min(next(delays), remaining))
