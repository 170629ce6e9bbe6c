"""The PostgreSQL store's update primitives inside its locked transaction, on the psycopg connection.

Updates (ledger moves, approval decisions, effects) run `_statements` on the driver connection that the
SQLAlchemy pool hands out, after ``BEGIN`` and the namespace's advisory lock: no per-statement
compilation, and psycopg prepares them server-side after a few uses. Allocation is not a session
of this kind: it is one call of ``allocate_episode`` (`_allocate`), so this session has the port's
update primitives only (`base.StoreSession`), and the identity a namespace records with its first
write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ... import safe_json
from ...effect import Effect
from ...episode import SCHEMA_VERSION, Episode
from ...errors import (
    DecisionConflict,
    EpisodeNotFound,
    IllegalTransition,
    StoreCorrupted,
)
from ...identity import EpisodeId, WeekId
from ._context import StoreContext
from ._rows import approval_value, effects_value, row_values

__all__ = [
    "IDENTITY_CHANGED",
    "IDENTITY_RE",
    "DECISION_CHANGED",
    "EFFECT_CHANGED",
    "ILLEGAL_TRANSITION",
    "STORE_IDENTITY_CHANGED",
    "PostgresSession",
]

#: SQLSTATEs raised by the guard triggers of migrations 0001, 0002, 0003 and 0006.
ILLEGAL_TRANSITION = "IJ001"
IDENTITY_CHANGED = "IJ002"
STORE_IDENTITY_CHANGED = "IJ003"
#: A recorded approval decision changed or went away, or its history lost an entry.
DECISION_CHANGED = "IJ004"
#: A recorded effect went away, a done one changed, or an effect's history lost an entry (its own
#: number: IJ005-IJ011 are the allocation function's and the tombstones').
EFFECT_CHANGED = "IJ012"
#: A store identity: 128 random bits in hex (the schema's check constraint says the same).
IDENTITY_RE = re.compile(r"[0-9a-f]{32}")


class PostgresSession:
    """The store's update primitives inside its locked transaction, after the advisory lock."""

    def __init__(self, context: StoreContext, conn: psycopg.Connection[Any]) -> None:
        self._context = context
        self._conn = conn
        self._sql = context.sql
        self._namespace = context.namespace
        self._new_identity: str | None = None

    def _episodes(self, sql: str, params: Mapping[str, Any]) -> list[Episode]:
        with self._conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql, {"namespace": self._namespace, **params})
            return [self._context.episode(row) for row in cur]

    def load(self, episode_id: EpisodeId) -> Episode | None:
        found = self._episodes(self._sql.load, {"episode_id": str(episode_id)})
        return found[0] if found else None

    def week_episodes(self, week: WeekId) -> list[Episode]:
        return self._episodes(self._sql.week, {"week_id": str(week)})

    def identity(self) -> str | None:
        """The namespace's identity as committed, or None for a namespace never written to."""
        row = self._conn.execute(self._sql.identity, {"namespace": self._namespace}).fetchone()
        if row is None:
            return None
        if not isinstance(row[0], str) or not IDENTITY_RE.fullmatch(row[0]):
            raise StoreCorrupted(self._context.where(table="store_identity"), "identity is not 32 hex digits")
        return row[0]

    def create_identity(self, identity: str) -> None:
        """Record the namespace's identity with this transaction's commit (and only if it commits)."""
        self._new_identity = identity

    def commit(self) -> None:
        """The commit point: the new identity (if any) and COMMIT, pipelined into one round trip."""
        if self._new_identity:
            with self._conn.pipeline():
                self._conn.execute(
                    self._sql.new_identity, {"namespace": self._namespace, "identity": self._new_identity}
                )
                self._conn.execute(b"COMMIT")
        else:
            self._conn.execute(b"COMMIT")

    def replace(self, before: Episode, after: Episode) -> None:
        params = row_values(self._namespace, after)
        record = before.to_record()
        params.update(
            schema_version=SCHEMA_VERSION,
            before_state=before.submission.state.value,
            before_submission=Jsonb(before.submission.to_dict()),
            before_status=before.status.value,
            before_approval=approval_value(record),
            before_effects=effects_value(record),
        )
        was, wanted = before.submission.state.value, after.submission.state.value
        try:
            updated = self._conn.execute(self._sql.replace, params).fetchall()
        except psycopg.Error as exc:
            if exc.sqlstate == ILLEGAL_TRANSITION:
                raise IllegalTransition(before.episode_id, was, wanted) from exc
            if exc.sqlstate == IDENTITY_CHANGED:
                raise ValueError("update must not change an episode's identity") from exc
            if exc.sqlstate == DECISION_CHANGED:
                raise _decision_conflict(before, after) from exc
            if exc.sqlstate == EFFECT_CHANGED:
                raise _effect_refused(before.episode_id, exc) from exc
            raise
        if not updated:
            # The row moved since ``before`` was read: someone wrote without the lock.
            now = self.load(before.id)
            if now is None:
                raise EpisodeNotFound(before.episode_id, self._context.location)
            if now.approval != before.approval:
                raise _decision_conflict(now, after)
            if now.effects != before.effects:
                raise _effect_moved(before, now, after)
            raise IllegalTransition(before.episode_id, now.submission.state.value, wanted)


def _decision_conflict(before: Episode, after: Episode) -> DecisionConflict:
    """What the database's guard refused (IJ004), as the error `approval.decided` gives for it."""
    was, wanted = before.approval, after.approval
    current = "undecided" if was.decision is None else was.decision.value
    change = "no decision" if wanted.decision is None else wanted.decision.value
    if was.decision is not None and wanted.decision is was.decision:
        change = f"a changed {change} decision or history"
    return DecisionConflict(before.episode_id, current, change, was.by, was.at)


def _effect_refused(episode_id: str, exc: psycopg.Error) -> IllegalTransition:
    """What the database's guard refused (IJ012), from its DETAIL: the effect, its state and the new one."""
    try:
        facts = safe_json.loads(exc.diag.message_detail or "")
    except safe_json.UnsafeJson:
        facts = None
    if not isinstance(facts, dict):
        facts = {}
    wanted = "absent" if facts.get("to") is None else str(facts["to"])
    return IllegalTransition(
        episode_id, str(facts.get("from")), f"{wanted} ({facts.get('why')})", what=f"effect {facts.get('effect')}"
    )


def _effect_moved(before: Episode, now: Episode, after: Episode) -> IllegalTransition:
    """A replace from a stale read whose effects changed meanwhile: the first effect that changed, as it is now."""
    name = next(n for n in {**before.effects, **now.effects} if now.effects.get(n) != before.effects.get(n))
    return IllegalTransition(
        now.episode_id, _state(now.effects.get(name)), _state(after.effects.get(name)), what=f"effect {name}"
    )


def _state(effect: Effect | None) -> str:
    return "absent" if effect is None else effect.state.value
