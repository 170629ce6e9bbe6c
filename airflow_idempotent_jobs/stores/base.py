"""The store port: public methods hold the policy, a backend supplies a few primitives."""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, Union, runtime_checkable

from .. import approval
from ..allocation import checked_owner, decide, new_episode, sole_holder
from ..effect import effects_kept
from ..episode import Decision, Episode
from ..errors import EpisodeNotFound, StoreMissing, StoreOutdated
from ..identity import EpisodeId, WeekId, validate_allocation_key, validate_fingerprint
from ..owner import OWNER_KEY, Owner
from ..record_rules import CheckReport, EpisodeRule, WeekRead

__all__ = ["AllocationSession", "EpisodeStore", "StoreSession"]

WeekLike = Union[str, WeekId]
EpisodeLike = Union[str, EpisodeId]
#: Stands for a metadata key that is not there (an owner may only be written by the allocation).
_ABSENT = object()


class StoreSession(Protocol):
    """What a backend can do while it holds the store's lock (and, for SQL, its transaction): updates."""

    def load(self, episode_id: EpisodeId) -> Episode | None:
        """The committed episode, or None."""

    def replace(self, before: Episode, after: Episode) -> None:
        """Persist ``after`` over ``before``; the caller checked ``before`` is current under this lock."""

    def week_episodes(self, week: WeekId) -> list[Episode]:
        """Every committed episode of ``week`` (for rules that span a week, such as a budget)."""


@runtime_checkable
class AllocationSession(StoreSession, Protocol):
    """A session that also has what `EpisodeStore.allocate`'s Python rule is written against.

    The file store's has; a backend that runs the rule elsewhere (PostgreSQL: in the server, one
    call) overrides `allocate` and needs none of it.
    """

    def holders(self, allocation_key: str) -> list[Episode]:
        """Every committed episode carrying this key (normally zero or one)."""

    def highest_sequence(self, week: WeekId) -> int | None:
        """The highest sequence ever committed in ``week``, or None for a week never used."""

    def insert(self, episode: Episode) -> None:
        """Persist a new episode durably; returning means it is committed."""


class EpisodeStore(abc.ABC):
    """Allocation, lookup and updates of episodes; every write runs under the store's lock."""

    @property
    @abc.abstractmethod
    def namespace(self) -> str:
        """A stable name for this store, part of every idempotency token it hands out."""

    @property
    def identity(self) -> str:
        """What makes this store's idempotency tokens its own: fixed for its life, unique among stores.

        Two stores (staging and production, two teams) must never hand out the same token for
        ``2026-W32-0``, or a provider would give one store the other's paid job.
        """
        return self.namespace

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the store lives, for messages (a path or a URL without password)."""

    @abc.abstractmethod
    def check(self, ids: Sequence[EpisodeId], rules: Sequence[EpisodeRule] = ()) -> CheckReport:
        """Read-only verification of this store's layout and records, never locking or writing.

        ``ids``: only these episodes (each one missing is a problem); empty: the whole store.
        ``rules`` run on every record read, beside the shared `check.check_episode_record`.
        """

    @abc.abstractmethod
    def require_existing(self) -> None:
        """`StoreUnavailable` unless a store this code can read is here (`StoreMissing` when nothing was
        ever written there, `StoreOutdated` for an older schema); never creates, upgrades or locks.

        For readers that must not write (Airflow's page, the checker, ``show``/``list``). A lookup or
        update of an episode never creates a store either (`EpisodeNotFound`); every other call
        creates it on first use, and every call but this one migrates an older schema.
        """

    @abc.abstractmethod
    def _session(self) -> AbstractContextManager[StoreSession]:
        """Hold the lock that covers discovery and persistence for the body of a ``with``."""

    @abc.abstractmethod
    def _read(self, episode_id: EpisodeId) -> Episode | None:
        """A committed episode read without the lock (reads see whole records only)."""

    @abc.abstractmethod
    def _read_holders(self, allocation_key: str) -> builtins.list[Episode]:
        """Committed episodes carrying this key, read without the lock."""

    @abc.abstractmethod
    def _read_all(self, week: WeekId | None) -> builtins.list[Episode]:
        """Committed episodes of one week, or of every week, in any order."""

    def allocate(
        self, week: WeekLike, allocation_key: str, fingerprint: str | None = None, *, owner: Owner | None = None
    ) -> Episode:
        """The episode this key owns in ``week``: the existing one on a retry, else the next sequence.

        ``owner``: the Airflow task instance allocating (the operator passes its own), recorded in
        the new episode in the same commit; a retry changes nothing, and a holder allocated by
        another DAG is `AllocationConflict` (`allocation.refuse_another_dag`).
        """
        week_id = WeekId.parse(week)
        key = validate_allocation_key(allocation_key)
        fp = validate_fingerprint(fingerprint)
        who = checked_owner(owner)
        with self._session() as session:
            if not isinstance(session, AllocationSession):
                raise TypeError(f"{type(self).__name__} must override allocate: its session cannot allocate")
            existing = decide(week_id, key, fp, session.holders(key), who)
            if existing is not None:
                return existing
            highest = session.highest_sequence(week_id)
            episode = new_episode(week_id, 0 if highest is None else highest + 1, key, fp, who)
            session.insert(episode)
            return episode

    def get(self, episode_id: EpisodeLike) -> Episode:
        eid = EpisodeId.parse(episode_id)
        self._require_store_of(eid)
        episode = self._read(eid)
        if episode is None:
            raise EpisodeNotFound(str(eid), self.location)
        return episode

    def _require_store_of(self, eid: EpisodeId) -> None:
        """`EpisodeNotFound` when no store was ever created here, before anything could create one (a
        mistyped URL, the wrong database): no episode lives in a store that is not there.

        A store of an older schema exists: the caller's own read or write migrates it, as writers do.
        """
        try:
            self.require_existing()
        except StoreMissing:
            raise EpisodeNotFound(str(eid), f"{self.location}: no episode store exists there") from None
        except StoreOutdated:
            pass

    def find(self, allocation_key: str) -> Episode | None:
        """The episode holding this key, None if none; several holders is a conflict (fail closed)."""
        key = validate_allocation_key(allocation_key)
        return sole_holder(key, self._read_holders(key))

    def list(self, week: WeekLike | None = None) -> builtins.list[Episode]:
        """Episodes ordered by week, then sequence."""
        week_id = None if week is None else WeekId.parse(week)
        return sorted(self._read_all(week_id), key=lambda e: (e.week_id, e.sequence))

    def read_week(self, week: WeekLike) -> WeekRead:
        """The week's episodes that can be read, and each record of it that cannot, named; never repairs.

        For readers that must show the rest of a week when one record is damaged (the page, the
        report); `list` raises `StoreCorrupted` instead. Damage that leaves nothing listable (the
        week's directory is not one) still raises.
        """
        read = self._read_week(WeekId.parse(week))
        episodes = sorted(read.episodes, key=lambda e: e.sequence)
        damaged = sorted(
            read.damaged, key=lambda d: -1 if d.episode_id is None else EpisodeId.parse(d.episode_id).sequence
        )
        return WeekRead(episodes, damaged)

    def _read_week(self, week: WeekId) -> WeekRead:
        """`read_week`'s primitive, in any order; a backend that cannot skip a damaged record raises."""
        return WeekRead(self._read_all(week))

    def update(self, episode_id: EpisodeLike, change: Callable[[Episode], Episode]) -> Episode:
        """Apply ``change`` to the current record under the lock and persist the result.

        ``change`` sees the committed record and may raise to refuse (the ledger's transitions do);
        then nothing is written. It must not change the episode's identity.
        """
        return self._update(episode_id, lambda episode, _week: change(episode), read_week=False)

    def decide(
        self,
        episode_id: EpisodeLike,
        decision: Decision | str,
        *,
        by: str,
        via: str,
        comment: str | None = None,
        at: str | None = None,
    ) -> Episode:
        """Record a human's approval decision under the lock; the same decision again changes nothing.

        A different decision already recorded is `DecisionConflict` (a decision is final), and so
        is rejecting an episode whose paid call has started. ``at``: when the person decided (an
        Airflow answer's ``responded_at``); default now.
        """
        wanted = Decision(decision)
        return self.update(
            episode_id, lambda episode: approval.decided(episode, wanted, by=by, via=via, comment=comment, at=at)
        )

    def ask(self, episode_id: EpisodeLike, *, by: str, via: str) -> Episode:
        """Record that a decision was asked for (by a task instance); a decided episode is unchanged."""
        return self.update(episode_id, lambda episode: approval.asked(episode, by=by, via=via))

    def update_in_week(
        self, episode_id: EpisodeLike, change: Callable[[Episode, builtins.list[Episode]], Episode]
    ) -> Episode:
        """Like `update`, but ``change`` also sees the week's other episodes, read under the same lock.

        For rules that span a week (a weekly budget): nobody can commit in between.
        """
        return self._update(episode_id, change, read_week=True)

    def _update(
        self,
        episode_id: EpisodeLike,
        change: Callable[[Episode, builtins.list[Episode]], Episode],
        *,
        read_week: bool,
    ) -> Episode:
        # The week is read only when asked for: a plain update (every ledger move) would otherwise
        # read each record of the week under the lock that allocations wait for, and discard them.
        eid = EpisodeId.parse(episode_id)
        self._require_store_of(eid)
        with self._session() as session:
            before = session.load(eid)
            if before is None:
                raise EpisodeNotFound(str(eid), self.location)
            week = session.week_episodes(eid.week) if read_week else []
            after = change(before, [e for e in week if e.episode_id != before.episode_id])
            if (after.episode_id, after.allocation_key) != (before.episode_id, before.allocation_key):
                raise ValueError("update must not change an episode's id or allocation key")
            if after.metadata.get(OWNER_KEY, _ABSENT) != before.metadata.get(OWNER_KEY, _ABSENT):
                raise ValueError("update must not add, change or drop the owner recorded at allocation")
            approval.kept(before, after)
            effects_kept(before.episode_id, before.effects, after.effects)
            if after != before:
                session.replace(before, after)
            return after

    def close(self) -> None:  # noqa: B027  (a hook with a sensible empty default)
        """Release connections; the file store holds none."""

    def __enter__(self) -> EpisodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
