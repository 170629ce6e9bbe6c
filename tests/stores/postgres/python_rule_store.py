"""The store port's Python allocation rule over a PostgreSQL store's tables, for the agreement test.

`PostgresEpisodeStore` allocates with one call of the server's function, so its session has only
the update primitives. `tests/stores/postgres/test_allocate_agreement.py` runs the port's own
`EpisodeStore.allocate` (``allocation.decide``, the week's high-water mark, ``new_episode``, the
insert) against the same rows, and needs the three allocation primitives that rule is written
against: `PythonRuleSession` adds them, as SQL on the locked transaction's connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.rows import dict_row

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.errors import AllocationConflict, InvalidIdentifier, StoreCorrupted
from airflow_idempotent_jobs.identity import EpisodeId, WeekId
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore, PostgresSession
from airflow_idempotent_jobs.stores.postgres._schema import quote_schema
from tests.pg import insert_episode

__all__ = ["PythonRuleSession", "PythonRuleStore"]


class PythonRuleSession(PostgresSession):
    """A `PostgresSession` on the same locked transaction, plus ``holders``, ``highest_sequence`` and ``insert``.

    Its inserts run at once, in the transaction the store's own session commits.
    """

    def __init__(self, session: PostgresSession, store: PostgresEpisodeStore) -> None:
        super().__init__(store._context, session._conn)
        self._store = store

    def holders(self, allocation_key: str) -> list[Episode]:
        sql = self._store._context.sql.holders
        with self._conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql, {"namespace": self._store.namespace, "key": allocation_key})
            return [self._store._context.episode(row) for row in cur]

    def highest_sequence(self, week: WeekId) -> int | None:
        """The week's high-water mark, or a row or tombstone it somehow missed: whichever is higher."""
        s = quote_schema(self._store.schema)
        mine = "namespace = %(namespace)s AND week_id = %(week_id)s"
        row = self._conn.execute(
            f"SELECT greatest((SELECT highest_sequence FROM {s}.weeks WHERE {mine}),"
            f" (SELECT max(sequence) FROM {s}.episodes WHERE {mine}),"
            f" (SELECT max(sequence) FROM {s}.episode_tombstones WHERE {mine}))",
            {"namespace": self._store.namespace, "week_id": str(week)},
        ).fetchone()
        if row is None or row[0] is None:
            return None
        highest = int(row[0])
        try:  # a mark no episode id can follow (past 999 999 999) was not written by this code
            EpisodeId(week, highest + 1)
        except InvalidIdentifier:
            where = self._store.where(str(week), table="weeks")
            raise StoreCorrupted(where, f"highest_sequence {highest} is out of range") from None
        return highest

    def insert(self, episode: Episode) -> None:
        """The episode and its week's mark, in the session's transaction (committed with it)."""
        try:
            insert_episode(self._conn, self._store.namespace, episode, self._store.schema)
        except psycopg.errors.UniqueViolation as exc:
            # Under the advisory lock only a writer that bypassed it can get here: fail closed.
            if exc.diag.constraint_name == "episodes_allocation_key_key":
                raise AllocationConflict(episode.allocation_key, "committed concurrently outside the lock") from exc
            where = self._store.where(episode.episode_id)
            raise StoreCorrupted(where, f"insert refused by {exc.diag.constraint_name}") from exc


class PythonRuleStore(PostgresEpisodeStore):
    """A PostgreSQL store whose locked session also has the Python rule's allocation primitives."""

    @contextmanager
    def _session(self) -> Iterator[PythonRuleSession]:
        with super()._session() as session:
            yield PythonRuleSession(session, self)
