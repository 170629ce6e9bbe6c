"""Read-only verification of a PostgreSQL store: it reads rows one by one and reports, never repairs.

Besides each row, it reports every row that is missing: an allocation commits its sequence and its
row together, so a week's sequences up to its high-water mark all have rows, and one without is a
row deleted by hand. A tombstone (schema version 5) names its key; a row deleted with the store's
triggers off left none, and the gap below the mark still shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from ...episode import Episode
from ...errors import InvalidIdentifier, StoreCorrupted
from ...identity import EpisodeId, WeekId
from ...record_rules import CheckReport, EpisodeRule, Problem, check_episode_record, unique_keys
from . import _schema
from ._allocate import row_deleted
from ._context import StoreContext

__all__ = ["check_postgres_store"]

#: The highest sequence an episode id can carry (`identity.EpisodeId`).
MAX_SEQUENCE = 999_999_999


def check_postgres_store(
    context: StoreContext, only: Sequence[EpisodeId] = (), rules: Sequence[EpisodeRule] = ()
) -> CheckReport:
    """Schema version, every row (or the named ones), one key per episode, the weeks' high-water marks,
    and the rows that are missing (deleted: a tombstone, or a sequence up to the week's mark without a row)."""
    # One read-only snapshot for the whole check, so that a concurrent allocation cannot look like a problem.
    reader = context.engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    with reader.connect() as conn, conn.begin():
        version = _schema.current_version(conn, context.schema)
        if version != _schema.LATEST_VERSION:
            found = "no store schema" if version is None else f"schema version {version}"
            if version is None:
                advice = " (the first allocation creates it)"
            elif version > _schema.LATEST_VERSION:
                advice = " (a later release wrote it: upgrade airflow-idempotent-jobs)"
            else:
                advice = " (any write migrates it)"
            return CheckReport(
                [Problem(context.where(), f"{found}; this code uses version {_schema.LATEST_VERSION}{advice}")]
            )
        sql, ns = context.sql, {"namespace": context.namespace}
        query, params = sql.episodes, dict[str, Any](ns)
        if only:
            query, params = f"{query} AND episode_id = ANY(%(ids)s)", {**ns, "ids": [str(e) for e in only]}
        rows = [row._mapping for row in conn.exec_driver_sql(f"{query} ORDER BY week_id, sequence", params)]
        marks = {str(week): mark for week, mark in conn.exec_driver_sql(sql.marks, ns)}
        tombstones = {row.episode_id: row for row in conn.exec_driver_sql(sql.tombstones, ns)}
        identity = conn.exec_driver_sql(sql.identity, ns).scalar_one_or_none()
    problems: list[Problem] = []
    if identity is None and (rows or marks):
        # Its tokens would derive from a new identity on the next write: a retry could not find its job.
        problems.append(Problem(context.where(table="store_identity"), "no identity recorded for this namespace"))
    good: list[Episode] = []
    for row in rows:
        try:
            episode = context.episode(row)
        except StoreCorrupted as exc:
            problems.append(Problem(exc.where, exc.reason))
            continue
        good.append(episode)
        where = context.where(episode.episode_id)
        problems += check_episode_record(episode, where)
        for rule in rules:
            problems += rule(episode, where)
    for week_id, mark in sorted(marks.items()):
        try:  # the next allocation must be able to follow the mark
            EpisodeId(WeekId.parse(week_id), int(mark) + 1)
        except InvalidIdentifier:
            problems.append(Problem(context.where(week_id, table="weeks"), f"highest_sequence {mark} is out of range"))
    for episode in good:
        mark = marks.get(episode.week_id)
        if mark is None or mark < episode.sequence:
            problems.append(
                Problem(
                    context.where(episode.episode_id), f"week {episode.week_id} high-water mark {mark} is behind it"
                )
            )
    present = {str(row["episode_id"]): row["allocation_key"] for row in rows}
    named = {str(e) for e in only}
    # A tombstone whose row is back with its key was restored; any other names a row that is gone.
    deleted = {i: t for i, t in tombstones.items() if present.get(i) != t.allocation_key}
    for episode_id, tomb in sorted(deleted.items()):
        if not only or episode_id in named:
            problems.append(Problem(context.where(episode_id), _deleted(context, tomb)))
    if only:
        problems += [Problem(str(e), "episode not found") for e in only if str(e) not in present.keys() | deleted]
    else:
        sequences = [(str(r["week_id"]), r["sequence"]) for r in rows]
        sequences += [(str(t.week_id), t.sequence) for t in deleted.values()]
        problems += _gaps(context, marks, sequences)
        problems += unique_keys(good)
    return CheckReport(problems, good)


def _deleted(context: StoreContext, tomb: Any) -> str:
    """The tombstone's finding, in the words the key's retry is refused with."""
    at = tomb.deleted_at.isoformat() if isinstance(tomb.deleted_at, datetime) else tomb.deleted_at
    facts = {"episode_id": tomb.episode_id, "deleted_by": tomb.deleted_by, "deleted_at": at}
    return row_deleted(context, str(tomb.allocation_key), facts).reason


def _gaps(context: StoreContext, marks: dict[str, int], taken: Iterable[tuple[str, int]]) -> list[Problem]:
    """Each run of sequences up to a week's highest (mark, row or tombstone) with neither a row nor a tombstone."""
    used: dict[str, set[int]] = {week: set() for week in marks}
    for week, sequence in taken:
        if 0 <= sequence <= MAX_SEQUENCE:  # one past the range is a damaged row, reported as such
            used.setdefault(week, set()).add(sequence)
    problems = []
    for week, sequences in sorted(used.items()):
        mark = marks.get(week)
        top = max([*sequences, *([mark] if mark is not None and 0 <= mark <= MAX_SEQUENCE else [])], default=-1)
        for first, last in _runs_missing(sorted(sequences), top):
            ids = f"{week}-{first}" if first == last else f"{week}-{first} to {week}-{last} ({last - first + 1} ids)"
            problems.append(
                Problem(
                    context.where(f"{week}-{first}"),
                    f"no row and no tombstone for {ids}, though the week used sequences up to {top}: deleted with "
                    "the store's triggers off? A retry of its key would get a new episode: restore it from a backup",
                )
            )
    return problems


def _runs_missing(present: list[int], top: int) -> Iterator[tuple[int, int]]:
    """The (first, last) runs of 0..top not in ``present`` (sorted, distinct)."""
    expected = 0
    for sequence in [*present, top + 1]:
        if sequence > expected:
            yield expected, sequence - 1
        expected = sequence + 1
