"""The operations read model: a week's jobs, spend and stuck submissions, as plain JSON.

One source for the Airflow page, its JSON API and ``idempotent-jobs report``, so all three say
the same thing. Read-only: nothing here takes the store's lock or writes. No Airflow import.

"Needs attention" lists what only a person can settle: every ``unknown`` submission, and every
``submitting`` claim at least ``claim_lease`` seconds old (its writer is presumed gone; the ledger
treats it the same, `paid.claims`). Each entry carries ``idempotent-jobs reconcile <id>``: the
base command, exactly as a refused retry names it (`SubmissionStateUnknown.command`). Which way to
settle (``--provider-url URL`` to look the token up, ``--remote-ref REF``, ``--not-submitted``)
needs knowledge this model does not have, so the reason lists them (`RECONCILE_WAYS`); the base
command run alone changes nothing and prints the same three. A ``submitting`` record whose claim
time cannot be read is listed too, with ``idempotent-jobs check <id>``: reconcile would refuse it.

A damaged record does not take its week down: the week is read with `EpisodeStore.read_week`, its
readable episodes are listed and totalled, and each damaged record is named in ``damaged`` (the
totals leave it out). Who may learn of a damaged record is the reader's call: the page's store
view names them to store-wide users only (`plugins.page_auth.VisibleStore`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import Any, Final, Protocol

from .episode import Episode, EpisodeStatus, SubmissionState
from .errors import InvalidIdentifier
from .identity import EpisodeId, WeekId
from .paid.budget import checked_amount, committed_cost
from .paid.claims import DEFAULT_CLAIM_LEASE
from .record_rules import WeekRead
from .task_key import Owner, episode_owner, owner_of


class ReadableStore(Protocol):
    """What the model reads: an `EpisodeStore`, or a view of one (the page's per-user filter)."""

    def read_week(self, week: WeekId) -> WeekRead:
        """The week's readable episodes and its damaged records, each in sequence order."""

    def get(self, episode_id: EpisodeId) -> Episode:
        """The episode; `EpisodeNotFound` if there is none."""


__all__ = [
    "DECISIONS",
    "MAX_WEEKS",
    "RECONCILE_WAYS",
    "Owner",
    "ReadableStore",
    "attention",
    "episode_owner",
    "episode_view",
    "owner_of",
    "reconcile_command",
    "row",
    "week_view",
    "weeks_view",
]

#: The ways to settle a submission, as README's reconcile section gives them.
RECONCILE_WAYS: Final = "--provider-url URL (look its token up), --remote-ref REF (this job is ours) or --not-submitted"
#: Row and count values for the approval gate: a decision, ``asked`` while one is awaited, ``none``.
DECISIONS: Final = ("approved", "rejected", "asked", "none")
#: Most weeks one overview or report covers (two years).
MAX_WEEKS: Final = 104

_S = SubmissionState


def reconcile_command(episode: Episode) -> str | None:
    """``idempotent-jobs reconcile <id>`` for a submission only reconcile may settle, else None."""
    if episode.submission.state in (_S.SUBMITTING, _S.UNKNOWN):
        return f"idempotent-jobs reconcile {episode.episode_id}"
    return None


def attention(episode: Episode, *, now: dt.datetime, claim_lease: float = DEFAULT_CLAIM_LEASE) -> dict[str, Any] | None:
    """The episode's "needs attention" entry, or None when nothing waits for a person."""
    sub = episode.submission
    command = reconcile_command(episode)
    if command is None:
        return None
    ways = f"settle it with {RECONCILE_WAYS}"
    if sub.state is _S.UNKNOWN:
        reason = f"submission unknown since {sub.updated_at}: the provider may have accepted it; {ways}"
        return {"episode_id": episode.episode_id, "reason": reason, "command": command}
    try:
        claimed = dt.datetime.fromisoformat(sub.claimed_at or "")
        age = (now - claimed).total_seconds()
    except (TypeError, ValueError):  # a naive or unreadable time: the ledger calls this StoreCorrupted
        reason = (
            f"submitting with an unreadable claim time {sub.claimed_at!r:.60}: reconcile refuses it; check the record"
        )
        return {
            "episode_id": episode.episode_id,
            "reason": reason,
            "command": f"idempotent-jobs check {episode.episode_id}",
        }
    if age < claim_lease:
        return None
    reason = (
        f"submitting since {sub.claimed_at} by {sub.claimed_by}: the claim is older than the "
        f"{claim_lease:g} s lease, its writer is presumed gone; {ways}"
    )
    return {"episode_id": episode.episode_id, "reason": reason, "command": command}


def decision_of(episode: Episode) -> str:
    """One of `DECISIONS`."""
    if episode.approval.decision is not None:
        return episode.approval.decision.value
    return "asked" if episode.approval.history else "none"


def row(episode: Episode) -> dict[str, Any]:
    """One episode as the week view lists it."""
    sub = episode.submission
    owner, source = episode_owner(episode)
    decision = decision_of(episode)
    return {
        "episode_id": episode.episode_id,
        "status": episode.status.value,
        "submission_state": sub.state.value,
        "remote_ref": sub.remote_ref,
        "cost": sub.cost,
        "decision": None if decision == "none" else decision,
        "created_at": episode.created_at,
        "updated_at": episode.updated_at,
        "allocation_key": episode.allocation_key,
        "owner": None if owner is None else owner.to_dict(),
        "owner_source": source,
    }


def week_view(
    store: ReadableStore,
    week: WeekId | str,
    *,
    budget: float | None,
    now: dt.datetime,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
) -> dict[str, Any]:
    """The week's rows, totals, attention list and damaged records. ``now`` is aware; its zone decides ``current``.

    Totals, counts and attention are of the readable episodes: ``damaged`` names what they leave out.
    """
    week_id = WeekId.parse(week)
    budget = checked_amount("weekly_budget", budget)
    _check_clock(now, claim_lease)
    read = store.read_week(week_id)
    episodes = read.episodes
    spend, unknown = _spend(episodes)
    return {
        "week_id": str(week_id),
        "previous": _shifted(week_id, -7),
        "next": _shifted(week_id, 7),
        "current": str(WeekId.from_datetime(now, now.tzinfo)),
        "budget": budget,
        "spend": spend,
        "spend_unknown": unknown,
        "counts": _counts(episodes),
        "episodes": [row(e) for e in episodes],
        "attention": _attention(episodes, now, claim_lease),
        "damaged": [damage.to_dict() for damage in read.damaged],
    }


def weeks_view(
    store: ReadableStore,
    *,
    current: WeekId,
    count: int = 12,
    now: dt.datetime | None = None,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
) -> dict[str, Any]:
    """``count`` weeks up to ``current``, newest first: episodes, spend, attention and damaged records per week."""
    current = WeekId.parse(current)
    if type(count) is not int or not 1 <= count <= MAX_WEEKS:
        raise InvalidIdentifier("week count", count, f"expected a whole number from 1 to {MAX_WEEKS}")
    now = dt.datetime.now(dt.timezone.utc) if now is None else now
    _check_clock(now, claim_lease)
    weeks = []
    for week_id in week_range(current, count):
        read = store.read_week(week_id)
        weeks.append(
            {
                "week_id": str(week_id),
                "episodes": len(read.episodes),
                "spend": _spend(read.episodes)[0],
                "attention": len(_attention(read.episodes, now, claim_lease)),
                "damaged": len(read.damaged),
            }
        )
    return {"current": str(current), "weeks": weeks}


def episode_view(
    store: ReadableStore, episode_id: str, *, now: dt.datetime, claim_lease: float = DEFAULT_CLAIM_LEASE
) -> dict[str, Any]:
    """The whole record (as ``show`` prints it), its owner (and where it came from) and its attention entry."""
    eid = EpisodeId.parse(episode_id)
    _check_clock(now, claim_lease)
    episode = store.get(eid)
    owner, source = episode_owner(episode)
    return {
        "episode": episode.to_dict(),
        "owner": None if owner is None else owner.to_dict(),
        "owner_source": source,
        "attention": _attention([episode], now, claim_lease),
    }


def week_range(newest: WeekId, count: int) -> list[WeekId]:
    """``newest`` and the ``count - 1`` weeks before it, newest first (stops at year 1)."""
    weeks = [newest]
    while len(weeks) < count:
        before = _shifted(weeks[-1], -7)
        if before is None:
            break
        weeks.append(WeekId.parse(before))
    return weeks


def _shifted(week: WeekId, days: int) -> str | None:
    """The week ``days`` away, or None past the calendar's ends (year 1, year 9999)."""
    try:
        return str(WeekId.from_date(week.monday() + dt.timedelta(days=days)))
    except (OverflowError, InvalidIdentifier):
        return None


def _check_clock(now: dt.datetime, claim_lease: float) -> None:
    if not isinstance(now, dt.datetime) or now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    if isinstance(claim_lease, bool) or not isinstance(claim_lease, (int, float)) or not math.isfinite(claim_lease):
        raise ValueError(f"claim_lease must be a finite number of seconds, not {claim_lease!r:.40}")


def _spend(episodes: list[Episode]) -> tuple[float, list[str]]:
    """The week's committed cost (`paid.budget.committed_cost`) and the episodes it cannot know."""
    total, unknown = 0.0, []
    for episode in episodes:
        cost = committed_cost(episode.submission)
        if cost is None:
            unknown.append(episode.episode_id)
        else:
            total += cost
    return total, unknown


def _counts(episodes: list[Episode]) -> dict[str, dict[str, int]]:
    """Every value of each field, zero included, so the shape never depends on the data."""
    status = Counter(e.status.value for e in episodes)
    submission = Counter(e.submission.state.value for e in episodes)
    decision = Counter(decision_of(e) for e in episodes)
    return {
        "status": {s.value: status[s.value] for s in EpisodeStatus},
        "submission": {s.value: submission[s.value] for s in SubmissionState},
        "decision": {d: decision[d] for d in DECISIONS},
    }


def _attention(episodes: list[Episode], now: dt.datetime, claim_lease: float) -> list[dict[str, Any]]:
    entries = (attention(e, now=now, claim_lease=claim_lease) for e in episodes)
    return [entry for entry in entries if entry is not None]
