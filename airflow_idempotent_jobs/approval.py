"""A human's decision on spending for one episode: recorded once, final, kept with the episode.

Pure rules over `Episode` values; the store applies them under its lock (`EpisodeStore.decide`),
so two approvers answering at once cannot both win, and a retry reads the recorded answer instead
of asking again. The history is append-only: entries are added, never changed or removed.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from .episode import Approval, Decision, Episode, EpisodeStatus, SubmissionState, utc_now
from .errors import ApprovalRequired, DecisionConflict, InvalidIdentifier

__all__ = [
    "Approval",
    "Decision",
    "MAX_BY",
    "MAX_COMMENT",
    "asked",
    "check_approved",
    "decided",
    "kept",
    "validate_actor",
    "validate_comment",
]

#: Longest accepted approver name and comment, in characters.
MAX_BY: Final = 200
MAX_COMMENT: Final = 2000
_ASKED: Final = "asked"


def validate_actor(by: object, what: str = "approver") -> str:
    """A name for the record: non-empty printable text of at most `MAX_BY` characters."""
    if not isinstance(by, str) or not by.strip():
        raise InvalidIdentifier(what, by, "must name who decides")
    if len(by) > MAX_BY or not by.isprintable():
        raise InvalidIdentifier(what, by, f"must be printable text of at most {MAX_BY} characters")
    return by


def validate_comment(comment: object) -> str | None:
    """Free text of at most `MAX_COMMENT` characters (newlines allowed), or None."""
    if comment is None:
        return None
    if not isinstance(comment, str):
        raise InvalidIdentifier("comment", comment, "must be text")
    if len(comment) > MAX_COMMENT or any(not (ch.isprintable() or ch in "\n\t") for ch in comment):
        raise InvalidIdentifier("comment", comment, f"must be printable text of at most {MAX_COMMENT} characters")
    return comment


def decided(
    episode: Episode,
    decision: Decision,
    *,
    by: str,
    via: str,
    comment: str | None = None,
    at: str | None = None,
) -> Episode:
    """``episode`` with ``decision`` recorded; unchanged when that same decision is already there.

    A decision is final: a different one already recorded is `DecisionConflict`. Rejecting an
    episode whose paid call has started is refused too (nothing can take that spending back).
    """
    by = validate_actor(by)
    comment = validate_comment(comment)
    current = episode.approval
    if current.decision is decision:
        return episode
    if current.decision is not None:
        raise DecisionConflict(episode.episode_id, current.decision.value, decision.value, current.by, current.at)
    if decision is Decision.REJECTED and episode.submission.state is not SubmissionState.NONE:
        raise DecisionConflict(
            episode.episode_id, f"submitted ({episode.submission.state.value})", decision.value, None, None
        )
    now = at or utc_now()
    entry = {"event": decision.value, "by": by, "at": now, "comment": comment, "via": via}
    approval = Approval(decision=decision, by=by, at=now, comment=comment, via=via, history=(*current.history, entry))
    status = EpisodeStatus.REJECTED if decision is Decision.REJECTED else episode.status
    return dataclasses.replace(episode, approval=approval, status=status, updated_at=now)


def asked(episode: Episode, *, by: str, via: str, at: str | None = None) -> Episode:
    """``episode`` with a question recorded (who asked: a task instance); unchanged once decided."""
    if episode.approval.decision is not None:
        return episode
    now = at or utc_now()
    entry = {"event": _ASKED, "by": validate_actor(by, "asked by"), "at": now, "comment": None, "via": via}
    approval = dataclasses.replace(episode.approval, history=(*episode.approval.history, entry))
    return dataclasses.replace(episode, approval=approval, updated_at=now)


def kept(before: Episode, after: Episode) -> None:
    """Refuse (`DecisionConflict`) an update that changes or drops a recorded decision or rewrites the history.

    The store runs it on every update, whatever the change: `decided` is not the only writer, and
    the PostgreSQL schema refuses the same for writers that bypass the store (SQLSTATE IJ004).
    """
    _rejection_kept(after)
    old, new = before.approval, after.approval
    if old == new:
        return
    history = new.history[: len(old.history)] == old.history
    if old.decision is not None and (not history or dataclasses.replace(old, history=new.history) != new):
        wanted = "no decision" if new.decision is None else f"a rewritten {new.decision.value} decision"
        raise DecisionConflict(before.episode_id, old.decision.value, wanted, old.by, old.at)
    if not history:
        raise DecisionConflict(
            before.episode_id, "undecided", "an approval history without its earlier events", None, None
        )


def _rejection_kept(episode: Episode) -> None:
    """A rejected episode keeps status rejected and spends nothing; only a rejection sets that status.

    The ledger maps its states to a status, and any `update` may set one: without this, a later
    write could turn a rejected episode back into ``allocated`` or ``running`` (the PostgreSQL schema
    refuses the same rows, constraint ``episodes_rejected_check``).
    """
    rejected = episode.approval.decision is Decision.REJECTED
    if rejected and episode.status is EpisodeStatus.REJECTED and episode.submission.state is SubmissionState.NONE:
        return
    if rejected:
        wanted = f"status {episode.status.value} with submission {episode.submission.state.value}"
        raise DecisionConflict(episode.episode_id, "rejected", wanted, episode.approval.by, episode.approval.at)
    if episode.status is EpisodeStatus.REJECTED:
        raise DecisionConflict(episode.episode_id, "undecided", "status rejected without a rejection", None, None)


def check_approved(episode: Episode) -> Episode:
    """``episode`` if its recorded decision is approved; otherwise `ApprovalRequired` naming why."""
    approval = episode.approval
    if approval.decision is Decision.APPROVED:
        return episode
    return _refuse(episode)


def _refuse(episode: Episode) -> Episode:
    approval = episode.approval
    if approval.decision is None:
        raise ApprovalRequired(episode.episode_id, "no decision is recorded")
    raise ApprovalRequired(
        episode.episode_id, f"it was {approval.decision.value} by {approval.by} at {approval.at}", rejected=True
    )
