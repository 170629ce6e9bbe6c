"""The allocation rule, in one place; stores only find and persist."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .episode import Episode, EpisodeStatus, utc_now
from .errors import AllocationConflict, InvalidIdentifier
from .identity import EpisodeId, WeekId
from .owner import OWNER_KEY, Owner
from .task_key import owner_of

__all__ = [
    "another_fingerprint",
    "another_week",
    "checked_owner",
    "decide",
    "new_episode",
    "refuse_another_dag",
    "several_holders",
    "sole_holder",
]


def decide(
    week: WeekId, key: str, fingerprint: str | None, holders: Sequence[Episode], owner: Owner | None = None
) -> Episode | None:
    """The episode to hand back (marked ``reused``), or None when a new one must be allocated.

    Fails closed: a key held by several episodes, in another week, with another fingerprint, or
    by another DAG than ``owner``'s raises `AllocationConflict`, because no rule could say which
    job the caller owns.
    """
    held = sole_holder(key, holders)
    if held is None:
        return None
    if held.week_id != str(week):
        raise another_week(key, week, held.episode_id, held.week_id)
    if held.fingerprint != fingerprint:
        raise another_fingerprint(key, fingerprint, held.episode_id, held.fingerprint)
    refuse_another_dag(key, owner, held)
    return dataclasses.replace(held, reused=True)


def refuse_another_dag(key: str, owner: Owner | None, held: Episode) -> None:
    """`AllocationConflict` when ``owner``'s DAG is not the DAG that allocated ``held``.

    A retry, a clear or a backfill runs in the DAG that allocated, so only its DAG is compared:
    a task renamed between tries, or one key shared on purpose by a DAG's map indexes, tasks or
    runs, gets the episode back, and its first owner stays. Another DAG with the same key is no
    retry of that invocation (keys are the authors' choice; a copied pattern is enough): handing it
    the episode would let it pay for, and be shown as, another DAG's job. An episode allocated
    before owners were recorded is compared by the DAG its key names; one that names none (the CLI,
    a migration) has no DAG to protect. Without ``owner`` (the library, the CLI) nothing is compared.
    """
    if owner is None:
        return
    first = held.allocated_by or owner_of(held.allocation_key)
    if first is None or first.dag_id == owner.dag_id:
        return
    how = "recorded" if held.allocated_by is not None else "named by its key"
    raise AllocationConflict(
        key,
        f"allocated by DAG {first.dag_id!r} ({how}), not by DAG {owner.dag_id!r}: "
        "another DAG's episode is never handed over",
        (held.episode_id,),
    )


def checked_owner(owner: object) -> Owner | None:
    """``owner`` as `allocate` takes it: None, or an `Owner` that a strict reader reads back."""
    if owner is None:
        return None
    if not isinstance(owner, Owner):
        raise InvalidIdentifier("owner", owner, "expected an Owner (dag_id, task_id, run_id, map_index)")
    if owner.map_index is not None and owner.map_index < 0:  # of_task would call it unmapped: say so
        raise InvalidIdentifier("owner", owner.to_dict(), "map_index must be None or >= 0")
    return Owner.of_task(owner.dag_id, owner.task_id, owner.run_id, owner.map_index)  # type: ignore[arg-type]


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


def new_episode(week: WeekId, sequence: int, key: str, fingerprint: str | None, owner: Owner | None = None) -> Episode:
    """A fresh episode record for the next sequence of ``week``; ``owner`` recorded in its metadata."""
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
        metadata={} if owner is None else {OWNER_KEY: owner.to_dict()},
    )
