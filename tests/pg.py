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

import pytest

__all__ = [
    "PgServer",
    "empty_database",
    "insert_before_approvals",
    "pg_database",
    "pg_server",
    "pg_url",
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


def insert_before_approvals(conn: Any, namespace: str, episode: Any, schema: str = "idempotent_jobs") -> None:
    """Insert ``episode`` as schema versions 1 and 2 stored it (no ``approval`` column): for upgrade tests."""
    from airflow_idempotent_jobs.stores.pg_session import row_values

    values = row_values(namespace, episode)
    del values["approval"]
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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
