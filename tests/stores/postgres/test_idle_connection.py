"""Connections the server closed while they sat idle in the store's pools are never handed to a call.

Allocation's pool has no pre-ping (a round trip per call): its checkout asks the kernel whether
the idle socket has anything to read (`stores.postgres._connection.spoke_while_idle`), and a connection the
server closed (``pg_terminate_backend``: a FATAL message, then end of stream) is replaced by a new
one before the call. Each test kills the store's idle sessions for real, then calls: the first
call works, on a new session, and the store holds exactly the episodes it should.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres._connection import APPLICATION_NAME, spoke_while_idle
from tests.pg_stopped import wait_for

pytestmark = pytest.mark.postgres

_OURS = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s"


def _sessions(admin: psycopg.Connection[Any]) -> set[int]:
    return {pid for (pid,) in admin.execute(_OURS, (APPLICATION_NAME,)).fetchall()}


def _kill_idle_sessions(admin: psycopg.Connection[Any]) -> set[int]:
    """Terminate every session of the store's (all idle in its pools), and wait until they are gone."""
    killed = _sessions(admin)
    assert killed, "the store holds no pooled session to kill"
    for pid in killed:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    wait_for(lambda: not (_sessions(admin) & killed), what="the killed sessions to end")
    return killed


def test_allocate_after_its_idle_connection_was_killed_works_first_time(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as admin, PostgresEpisodeStore(pg_database) as store:
        first = store.allocate("2026-W32", "run-0")
        killed = _kill_idle_sessions(admin)
        second = store.allocate("2026-W32", "run-1")  # no error: the dead connection was replaced
        assert (second.episode_id, second.reused) == ("2026-W32-1", False)
        assert not (_sessions(admin) & killed), "a new session made the call"
        _kill_idle_sessions(admin)
        again = store.allocate("2026-W32", "run-1")  # a retry after the kill finds its episode
        assert (again.episode_id, again.reused) == ("2026-W32-1", True)
        _kill_idle_sessions(admin)
        # The reads' pool (pre-ping) and the updates' session recover the same way.
        assert store.get(first.episode_id) == first
        assert [e.allocation_key for e in store.list()] == ["run-0", "run-1"]
        assert check_store(store) == []


def test_every_idle_connection_of_a_busy_pool_killed_at_once(pg_database: str) -> None:
    """As after a server restart: every pooled connection is dead; each call still works first time."""
    with psycopg.connect(pg_database, autocommit=True) as admin, PostgresEpisodeStore(pg_database) as store:
        store.allocate("2026-W32", "warm")
        errors: list[BaseException] = []

        def allocate_many(n: int) -> None:
            try:
                for i in range(10):
                    store.allocate("2026-W32", f"t{n}-{i}")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=allocate_many, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        killed = _kill_idle_sessions(admin)
        assert len(killed) >= 2, "the pools held several connections"
        after = [store.allocate("2026-W33", f"after-{i}") for i in range(6)]
        assert [(e.episode_id, e.reused) for e in after] == [(f"2026-W33-{i}", False) for i in range(6)]
        sequences = sorted(e.sequence for e in store.list("2026-W32"))
        assert sequences == list(range(41))
        assert check_store(store) == []


def test_spoke_while_idle_tells_a_live_idle_connection_from_one_the_server_closed(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as admin, psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("SELECT 1")
        assert not spoke_while_idle(conn)
        pid = conn.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_for(lambda: spoke_while_idle(conn), what="the server's goodbye on the idle socket")
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        assert spoke_while_idle(conn)  # broken or closed now: never handed out again
