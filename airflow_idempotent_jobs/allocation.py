"""The allocation rule, in one place; stores only find and persist."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .episode import Episode, EpisodeStatus, utc_now
from .errors import AllocationConflict
from .identity import EpisodeId, WeekId

__all__ = ["decide", "new_episode", "sole_holder"]


def decide(week: WeekId, key: str, fingerprint: str | None, holders: Sequence[Episode]) -> Episode | None:
    """The episode to hand back (marked ``reused``), or None when a new one must be allocated.

    Fails closed: a key held by several episodes, in another week, or with another fingerprint
    raises `AllocationConflict`, because no rule could say which job the caller owns.
    """
    held = sole_holder(key, holders)
    if held is None:
        return None
    ids = (held.episode_id,)
    if held.week_id != str(week):
        raise AllocationConflict(key, f"already allocated in {held.week_id}, not {week}", ids)
    if held.fingerprint != fingerprint:
        raise AllocationConflict(key, f"fingerprint {fingerprint!r} differs from the stored {held.fingerprint!r}", ids)
    return dataclasses.replace(held, reused=True)


def sole_holder(key: str, holders: Sequence[Episode]) -> Episode | None:
    """The one episode holding ``key``, None if none; several is `AllocationConflict` (fail closed)."""
    if len(holders) > 1:
        raise AllocationConflict(key, "held by several episodes", tuple(sorted(h.episode_id for h in holders)))
    return holders[0] if holders else None


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
