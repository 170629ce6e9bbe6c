"""The operations read model: a week's jobs, spend, and stuck submissions and effects, as plain JSON.

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

Effects after the payment (`effect`) are read the same way: every ``unknown`` effect and every
``pending`` one whose claim is at least ``claim_lease`` old is listed with
``idempotent-jobs reconcile <id> --effect <name>`` (the name shell-quoted when it needs it: a
mapped effect's ``[N]`` is a shell pattern); the reason names the three ways (`EFFECT_RECONCILE_WAYS`).

A damaged record does not take its week down: the week is read with `EpisodeStore.read_week`, its
readable episodes are listed and totalled, and each damaged record is named in ``damaged`` (the
totals leave it out). Who may learn of a damaged record is the reader's call: the page's store
view names them to store-wide users only (`plugins.page_auth.VisibleStore`).
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
from collections import Counter
from typing import Any, Final, Protocol

from .effect import Effect, EffectState
from .episode import Episode, EpisodeStatus, SubmissionState
from .errors import InvalidIdentifier
from .identity import EpisodeId, WeekId
from .paid.budget import checked_amount, committed_cost
from .paid.claims import DEFAULT_CLAIM_LEASE
from .record_rules import WeekRead
from .task_key import Owner, episode_owner, owner_of
from .week_rows import DECISIONS, RowQuery, decision_of, select


class ReadableStore(Protocol):
    """What the model reads: an `EpisodeStore`, or a view of one (the page's per-user filter)."""

    def read_week(self, week: WeekId) -> WeekRead:
        """The week's readable episodes and its damaged records, each in sequence order."""

    def get(self, episode_id: EpisodeId) -> Episode:
        """The episode; `EpisodeNotFound` if there is none."""


__all__ = [
    "DECISIONS",
    "EFFECT_RECONCILE_WAYS",
    "MAX_WEEKS",
    "RECONCILE_WAYS",
    "Owner",
    "ReadableStore",
    "attention",
    "effect_attention",
    "effect_reconcile_command",
    "episode_owner",
    "episode_view",
    "owner_of",
    "reconcile_command",
    "row",
    "week_view",
    "weeks_view",
]

#: The ways to settle a submission, as docs/reference/cli.md gives them.
RECONCILE_WAYS: Final = "--provider-url URL (look its token up), --remote-ref REF (this job is ours) or --not-submitted"
#: The ways to settle an effect, as docs/reference/cli.md gives them.
EFFECT_RECONCILE_WAYS: Final = (
    "--lookup-url URL (look its token up), --done REF (it happened) or --not-done (the next run runs it once)"
)
#: Most weeks one overview or report covers (two years).
MAX_WEEKS: Final = 104

_S = SubmissionState


def reconcile_command(episode: Episode) -> str | None:
    """``idempotent-jobs reconcile <id>`` for a submission only reconcile may settle, else None."""
    if episode.submission.state in (_S.SUBMITTING, _S.UNKNOWN):
        return f"idempotent-jobs reconcile {episode.episode_id}"
    return None


def attention(episode: Episode, *, now: dt.datetime, claim_lease: float = DEFAULT_CLAIM_LEASE) -> dict[str, Any] | None:
    """The submission's "needs attention" entry, or None when it waits for nobody (effects: `effect_attention`)."""
    sub = episode.submission
    command = reconcile_command(episode)
    if command is None:
        return None
    ways = f"settle it with {RECONCILE_WAYS}"
    if sub.state is _S.UNKNOWN:
        reason = f"submission unknown since {sub.updated_at}: the provider may have accepted it; {ways}"
        entry: dict[str, Any] | None = {"episode_id": episode.episode_id, "reason": reason, "command": command}
    else:
        entry = _stale_claim(
            episode,
            "submitting",
            sub.claimed_at,
            sub.claimed_by,
            "writer",
            now=now,
            lease=claim_lease,
            settle=(ways, command),
        )
    if entry is not None and entry["command"] == command:  # the token a lookup at the provider asks for
        entry["token"] = sub.token
    return entry


def _stale_claim(
    episode: Episode,
    what: str,
    claimed_at: str | None,
    claimed_by: str | None,
    who: str,
    *,
    now: dt.datetime,
    lease: float,
    settle: tuple[str, str],
) -> dict[str, Any] | None:
    """The entry for a claim (a submission's or an effect's) older than the lease, or None; an unreadable
    claim time points to ``check`` (the ledgers call it StoreCorrupted)."""
    try:
        age = (now - dt.datetime.fromisoformat(claimed_at or "")).total_seconds()
    except (TypeError, ValueError):  # a naive or unreadable time
        reason = f"{what} with an unreadable claim time {claimed_at!r:.60}: reconcile refuses it; check the record"
        return {
            "episode_id": episode.episode_id,
            "reason": reason,
            "command": f"idempotent-jobs check {episode.episode_id}",
        }
    if age < lease:
        return None
    ways, command = settle
    reason = (
        f"{what} since {claimed_at} by {claimed_by}: the claim is older than the "
        f"{lease:g} s lease, its {who} is presumed gone; {ways}"
    )
    return {"episode_id": episode.episode_id, "reason": reason, "command": command}


def effect_reconcile_command(episode: Episode, name: str) -> str:
    """``idempotent-jobs reconcile <id> --effect <name>``, the name quoted for a shell when it needs it."""
    return f"idempotent-jobs reconcile {episode.episode_id} --effect {shlex.quote(name)}"


def effect_attention(
    episode: Episode, *, now: dt.datetime, claim_lease: float = DEFAULT_CLAIM_LEASE
) -> list[dict[str, Any]]:
    """The "needs attention" entries of the episode's effects, by name (stores keep no order of their own)."""
    entries = []
    for name, effect in sorted(episode.effects.items()):
        entry = _effect_entry(episode, name, effect, now, claim_lease)
        if entry is not None:
            entries.append(entry)
    return entries


def _effect_entry(
    episode: Episode, name: str, effect: Effect, now: dt.datetime, claim_lease: float
) -> dict[str, Any] | None:
    ways = f"settle it with {EFFECT_RECONCILE_WAYS}"
    command = effect_reconcile_command(episode, name)
    if effect.state is EffectState.UNKNOWN:
        reason = f"effect {name} unknown since {effect.updated_at}: it may have happened; {ways}"
        return {"episode_id": episode.episode_id, "reason": reason, "command": command}
    if effect.state is not EffectState.PENDING:
        return None
    return _stale_claim(
        episode,
        f"effect {name} pending",
        effect.claimed_at,
        effect.claimed_by,
        "runner",
        now=now,
        lease=claim_lease,
        settle=(ways, command),
    )


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
    rows: RowQuery | None = None,
) -> dict[str, Any]:
    """The week's rows, totals, attention list and damaged records. ``now`` is aware; its zone decides ``current``.

    Totals, counts and attention are of the readable episodes: ``damaged`` names what they leave out.
    With ``rows`` (the page), ``episodes`` is the page of rows it selects and ``rows`` says where that
    page is (`week_rows.select`); totals, counts and attention stay of the whole week, and
    ``spend_by_dag`` splits the spend by owning DAG.
    """
    week_id = WeekId.parse(week)
    budget = checked_amount("weekly_budget", budget)
    _check_clock(now, claim_lease)
    read = store.read_week(week_id)
    episodes = read.episodes
    spend, unknown = _spend(episodes)
    listed, where = (episodes, None) if rows is None else select(episodes, rows)
    view = {
        "week_id": str(week_id),
        "previous": _shifted(week_id, -7),
        "next": _shifted(week_id, 7),
        "current": str(WeekId.from_datetime(now, now.tzinfo)),
        "budget": budget,
        "spend": spend,
        "spend_unknown": unknown,
        "counts": _counts(episodes),
        "episodes": [row(e) for e in listed],
        "attention": _attention(episodes, now, claim_lease),
        "damaged": [damage.to_dict() for damage in read.damaged],
    }
    if where is not None:
        view["rows"] = where
        view["spend_by_dag"] = _spend_by_dag(episodes)
    return view


def _spend_by_dag(episodes: list[Episode]) -> list[dict[str, Any]]:
    """The week's spend per recorded owning DAG (``null``: none recorded; a key proves nothing), dearest first."""
    by_dag: dict[str | None, list[Episode]] = {}
    for episode in episodes:
        owner = episode.allocated_by
        by_dag.setdefault(None if owner is None else owner.dag_id, []).append(episode)
    out = []
    for dag_id, owned in by_dag.items():
        spend, unknown = _spend(owned)
        out.append({"dag_id": dag_id, "episodes": len(owned), "spend": spend, "spend_unknown": len(unknown)})
    return sorted(out, key=lambda item: (-item["spend"], item["dag_id"] or ""))


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
    effect = Counter(fx.state.value for e in episodes for fx in e.effects.values())
    return {
        "status": {s.value: status[s.value] for s in EpisodeStatus},
        "submission": {s.value: submission[s.value] for s in SubmissionState},
        "decision": {d: decision[d] for d in DECISIONS},
        "effect": {s.value: effect[s.value] for s in EffectState},
    }


def _attention(episodes: list[Episode], now: dt.datetime, claim_lease: float) -> list[dict[str, Any]]:
    """Per episode in order: its submission's entry, then its effects'."""
    entries: list[dict[str, Any]] = []
    for episode in episodes:
        paid = attention(episode, now=now, claim_lease=claim_lease)
        entries += ([] if paid is None else [paid]) + effect_attention(episode, now=now, claim_lease=claim_lease)
    return entries
