"""The allocation rule, in one place; stores only find and persist."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .episode import Episode, EpisodeStatus, utc_now
from .errors import AllocationConflict
from .identity import EpisodeId, WeekId

__all__ = ["another_fingerprint", "another_week", "decide", "new_episode", "several_holders", "sole_holder"]


def decide(week: WeekId, key: str, fingerprint: str | None, holders: Sequence[Episode]) -> Episode | None:
    """The episode to hand back (marked ``reused``), or None when a new one must be allocated.

    Fails closed: a key held by several episodes, in another week, or with another fingerprint
    raises `AllocationConflict`, because no rule could say which job the caller owns.
    """
    held = sole_holder(key, holders)
    if held is None:
        return None
    if held.week_id != str(week):
        raise another_week(key, week, held.episode_id, held.week_id)
    if held.fingerprint != fingerprint:
        raise another_fingerprint(key, fingerprint, held.episode_id, held.fingerprint)
    return dataclasses.replace(held, reused=True)


def sole_holder(key: str, holders: Sequence[Episode]) -> Episode | None:
    """The one episode holding ``key``, None if none; several is `AllocationConflict` (fail closed)."""
    if len(holders) > 1:
        raise several_holders(key, [h.episode_id for h in holders])
    return holders[0] if holders else None


# The three conflicts, worded once: `decide` raises them, and so does the PostgreSQL store when its
# server-side copy of the rule (``allocate_episode``) reports one.
def several_holders(key: str, episode_ids: Sequence[str]) -> AllocationConflict:
    """The key is held by more than one episode: no rule could say which job the caller owns."""
    return AllocationConflict(key, "held by several episodes", tuple(sorted(episode_ids)))


def another_week(key: str, week: WeekId | str, episode_id: str, held_week: str) -> AllocationConflict:
    """The key's episode belongs to another week than the one asked for."""
    return AllocationConflict(key, f"already allocated in {held_week}, not {week}", (episode_id,))


def another_fingerprint(key: str, fingerprint: str | None, episode_id: str, stored: str | None) -> AllocationConflict:
    """The key's episode was allocated for another request."""
    return AllocationConflict(key, f"fingerprint {fingerprint!r} differs from the stored {stored!r}", (episode_id,))


def new_episode(week: WeekId, sequence: int, key: str, fingerprint: str | None) -> Episode:
    """A fresh episode record for the next sequence of ``week``."""
    episode_id = EpisodeId(week, sequence)
    now = utc_now()
    return Episode(
        episode_id=str(episode_id),
        week_id=str(week),
        sequence=sequence,
        allocation_key=key,
        fingerprint=fingerprint,
        status=EpisodeStatus.ALLOCATED,
        created_at=now,
        updated_at=now,
    )
