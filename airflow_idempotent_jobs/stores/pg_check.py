"""Read-only verification of a PostgreSQL store: it reads rows one by one and reports, never repairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..check import CheckReport, EpisodeRule, Problem, check_episode_record, unique_keys
from ..episode import Episode
from ..errors import InvalidIdentifier, StoreCorrupted
from ..identity import EpisodeId, WeekId
from . import pg_schema

if TYPE_CHECKING:
    from .postgres import PostgresEpisodeStore

__all__ = ["check_postgres_store"]


def check_postgres_store(
    store: PostgresEpisodeStore, only: Sequence[EpisodeId] = (), rules: Sequence[EpisodeRule] = ()
) -> CheckReport:
    """Schema version, every row (or the named ones), one key per episode, and the weeks' high-water marks."""
    tables = store.tables
    # One read-only snapshot for the whole check, so that a concurrent allocation cannot look like a problem.
    reader = store.engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    with reader.connect() as conn, conn.begin():
        version = pg_schema.current_version(conn, store.schema)
        if version != pg_schema.LATEST_VERSION:
            found = "no store schema" if version is None else f"schema version {version}"
            if version is None:
                advice = " (the first allocation creates it)"
            elif version > pg_schema.LATEST_VERSION:
                advice = " (a later release wrote it: upgrade airflow-idempotent-jobs)"
            else:
                advice = " (any write migrates it)"
            return CheckReport(
                [Problem(store.where(), f"{found}; this code uses version {pg_schema.LATEST_VERSION}{advice}")]
            )
        episodes = tables.episodes
        query = sa.select(*pg_schema.episode_columns(episodes)).where(episodes.c.namespace == store.namespace)
        if only:
            query = query.where(episodes.c.episode_id.in_([str(e) for e in only]))
        rows = conn.execute(query.order_by(episodes.c.week_id, episodes.c.sequence)).all()
        marks = dict(
            conn.execute(
                sa.select(tables.weeks.c.week_id, tables.weeks.c.highest_sequence).where(
                    tables.weeks.c.namespace == store.namespace
                )
            ).all()
        )
        identity = conn.execute(
            sa.select(tables.store_identity.c.identity).where(tables.store_identity.c.namespace == store.namespace)
        ).scalar_one_or_none()
    problems: list[Problem] = []
    if identity is None and (rows or marks):
        # Its tokens would derive from a new identity on the next write: a retry could not find its job.
        problems.append(Problem(store.where(table="store_identity"), "no identity recorded for this namespace"))
    good: list[Episode] = []
    for row in rows:
        try:
            episode = store.episode_from_row(row._mapping)
        except StoreCorrupted as exc:
            problems.append(Problem(exc.where, exc.reason))
            continue
        good.append(episode)
        where = store.where(episode.episode_id)
        problems += check_episode_record(episode, where)
        for rule in rules:
            problems += rule(episode, where)
    for week_id, mark in sorted(marks.items()):
        try:  # the next allocation must be able to follow the mark
            EpisodeId(WeekId.parse(week_id), int(mark) + 1)
        except InvalidIdentifier:
            problems.append(Problem(store.where(week_id, table="weeks"), f"highest_sequence {mark} is out of range"))
    for episode in good:
        mark = marks.get(episode.week_id)
        if mark is None or mark < episode.sequence:
            problems.append(
                Problem(store.where(episode.episode_id), f"week {episode.week_id} high-water mark {mark} is behind it")
            )
    if only:
        present = {str(row._mapping["episode_id"]) for row in rows}
        problems += [Problem(str(e), "episode not found") for e in only if str(e) not in present]
    else:
        problems += unique_keys(good)
    return CheckReport(problems, good)
