"""A real PostgreSQL for tests: one migrated template database per session, a fresh copy per test.

The server comes from the libpq variables (``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGPASSWORD``,
``PGDATABASE`` for the admin database), default ``postgres@127.0.0.1:5432``. Where no server
answers, PostgreSQL tests skip with the reason, except under ``CI=true``, where they fail: CI
must never pass without them.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import psutil
import pytest

__all__ = [
    "PgServer",
    "catalog",
    "empty_database",
    "insert_before_approvals",
    "insert_episode",
    "install_schema",
    "pg_database",
    "pg_server",
    "pg_url",
    "row_as_of",
    "spawn_together",
]

_OURS = re.compile(r"ij_(?:tpl|t)_([0-9]+)_[0-9a-f]+(?:_[0-9]+)?")


def pg_url(dbname: str) -> str:
    """A ``postgresql://`` URL for ``dbname`` on the test server."""
    user = os.environ.get("PGUSER", "postgres")
    password = os.environ.get("PGPASSWORD")
    auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    return f"postgresql://{auth}@{host}:{port}/{dbname}"


#: The columns of ``episodes`` that a schema version added after the first, by version: a store of
#: an earlier version has no such column.
ADDED_COLUMNS: dict[int, str] = {3: "approval", 6: "effects"}


def row_as_of(namespace: str, episode: Any, version: int | None) -> dict[str, Any]:
    """The row's values as a writer of schema ``version`` (None: this code's) wrote them."""
    from airflow_idempotent_jobs.stores.postgres._rows import row_values

    values = row_values(namespace, episode)
    for added, column in ADDED_COLUMNS.items():
        if version is not None and version < added and values.pop(column) is not None:
            raise ValueError(f"{episode.episode_id} has {column}, which schema version {version} cannot hold")
    return values


def insert_episode(
    conn: Any, namespace: str, episode: Any, schema: str = "idempotent_jobs", version: int | None = None
) -> None:
    """Insert ``episode`` and raise its week's high-water mark, as an allocation commits them (one statement).

    ``version``: insert it into a store of that schema version, as its writer did (for upgrade tests).
    """
    s = f'"{schema}"'
    row = row_as_of(namespace, episode, version)
    values = ", ".join(f"%({c})s::{s}.submission_state" if c == "submission_state" else f"%({c})s" for c in row)
    conn.execute(
        f"WITH mark AS (INSERT INTO {s}.weeks AS w (namespace, week_id, highest_sequence)"
        " VALUES (%(namespace)s, %(week_id)s, %(sequence)s) ON CONFLICT (namespace, week_id)"
        " DO UPDATE SET highest_sequence = greatest(w.highest_sequence, excluded.highest_sequence))"
        f" INSERT INTO {s}.episodes ({', '.join(row)}) VALUES ({values})",
        row,
    )


def insert_before_approvals(conn: Any, namespace: str, episode: Any, schema: str = "idempotent_jobs") -> None:
    """Insert ``episode`` as schema versions 1 and 2 stored it (no ``approval`` column): for upgrade tests."""
    values = row_as_of(namespace, episode, 2)
    columns = ", ".join(values)
    placeholders = ", ".join(
        f'%({name})s::"{schema}".submission_state' if name == "submission_state" else f"%({name})s" for name in values
    )
    conn.execute(
        f'INSERT INTO "{schema}".weeks VALUES (%(namespace)s, %(week_id)s, %(sequence)s)'
        " ON CONFLICT (namespace, week_id) DO UPDATE SET highest_sequence ="
        " greatest(weeks.highest_sequence, excluded.highest_sequence)",
        values,
    )
    conn.execute(f'INSERT INTO "{schema}".episodes ({columns}) VALUES ({placeholders})', values)


def catalog(url: str) -> dict[str, Any]:
    """Every schema, relation, column, function, type and trigger outside PostgreSQL's own, and every row of ours.

    Equal before and after a call: the call wrote nothing (no DDL, no row) in that database.
    """
    import psycopg

    from tests.backends import PostgresBackend

    own = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%%'"
    queries = {
        "schemas": f"SELECT n.nspname FROM pg_namespace n WHERE {own} ORDER BY 1",
        "relations": "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
        f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {own} ORDER BY 1, 2",
        "columns": "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE {own} AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2, 3",
        "functions": "SELECT n.nspname, p.proname, md5(p.prosrc) FROM pg_proc p "
        f"JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {own} ORDER BY 1, 2, 3",
        "types": "SELECT n.nspname, t.typname FROM pg_type t "
        f"JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {own} ORDER BY 1, 2",
        "triggers": "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {own} AND NOT t.tgisinternal ORDER BY 1, 2",
    }
    with psycopg.connect(url, autocommit=True) as conn:
        found: dict[str, Any] = {name: [list(row) for row in conn.execute(sql)] for name, sql in queries.items()}
    found["rows"] = PostgresBackend(url).snapshot()
    return found


def install_schema(url: str, version: int, episodes: list[Any] | None = None) -> None:
    """The store's schema at ``version`` in ``url``, with these episodes (each an `Episode`, or a
    ``(week, sequence, key)`` tuple), as a writer of that version left it."""
    import psycopg
    import sqlalchemy as sa

    from airflow_idempotent_jobs.allocation import new_episode
    from airflow_idempotent_jobs.identity import WeekId
    from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            pg_schema.migrate(conn, pg_schema.DEFAULT_SCHEMA, where="test", lock_timeout_ms=5000, target=version)
    finally:
        engine.dispose()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO idempotent_jobs.store_identity (namespace, identity) VALUES ('default', md5('x'))")
        for item in episodes or []:
            episode = new_episode(WeekId.parse(item[0]), item[1], item[2], None) if isinstance(item, tuple) else item
            insert_episode(conn, "default", episode, version=version)


def spawn_together(target: Callable[..., None], args: list[tuple[Any, ...]], timeout: float) -> list[Any]:
    """Run ``target(*a, barrier, results)`` in one spawned process per ``a``; returns what each put.

    Each ``target`` waits on the shared barrier before its work, so all clients hit the server
    at once, and puts exactly one result (its error too: the test asserts on it).
    """
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(len(args)), spawn.Queue()
    procs = [spawn.Process(target=target, args=(*each, barrier, results)) for each in args]
    for proc in procs:
        proc.start()
    try:
        return [results.get(timeout=timeout) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)


class PgServer:
    """Creates and drops this session's databases (all named ``ij_t_<pid>_...``)."""

    def __init__(self) -> None:
        self.admin_url = pg_url(os.environ.get("PGDATABASE", "postgres"))
        self._tag = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self._counter = itertools.count()
        self.template = f"ij_tpl_{self._tag}"

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def problem(self) -> str | None:
        """Why the server cannot be used, or None."""
        import psycopg

        try:
            with psycopg.connect(self.admin_url, connect_timeout=3, autocommit=True) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            return " ".join(str(exc).split())
        return None

    def start(self) -> None:
        """Drop what dead sessions left behind, then build the migrated template."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            names = [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'ij\\_%'")]
            for name in names:
                match = _OURS.fullmatch(name)
                if match and not _alive(int(match.group(1))):
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.template}"')
        from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore

        store = PostgresEpisodeStore(pg_url(self.template))
        try:
            store.ensure_schema()
        finally:
            store.close()

    def stop(self) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')

    def create(self, *, empty: bool = False) -> str:
        """A new database (a copy of the migrated template, or an empty one); returns its name."""
        name = f"ij_t_{self._tag}_{next(self._counter)}"
        template = "template0" if empty else self.template
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return name

    def drop(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _alive(pid: int) -> bool:
    return bool(psutil.pid_exists(pid))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's server with its template; skips (or fails under CI=true) without a server."""
    server = PgServer()
    problem = server.problem()
    if problem is not None:
        message = f"PostgreSQL not reachable at {server.admin_url} (set PG* variables): {problem}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}; CI=true requires it", pytrace=False)
        pytest.skip(message)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh database with the store's schema, dropped after the test."""
    name = pg_server.create()
    try:
        yield pg_url(name)
    finally:
        pg_server.drop(name)


@pytest.fixture
def empty_database(pg_server: PgServer) -> Iterator[str]:
    """The URL of a database that has never seen the store (no schema at all), dropped after the test."""
    name = pg_server.create(empty=True)
    try:
        yield pg_url(name)
    finally:
        pg_server.drop(name)
