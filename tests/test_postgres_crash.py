"""Crash consistency of the PostgreSQL store: the allocating process SIGKILLed at each step.

The child wraps the session's primitives in its own process (no production hook) and kills itself
right after one of them: with the advisory lock held, after the key lookup, after the highest
sequence was read, after the INSERT was sent but before COMMIT, and right after COMMIT. The server
sees the connection drop and rolls back whatever was not committed; the retry in a fresh process
then allocates at most one episode, and `check` finds nothing wrong.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.verify import check_store

pytestmark = pytest.mark.postgres

#: Where the child dies, and whether the episode is committed by then.
POINTS = {"holders": False, "highest_sequence": False, "insert_sent": False, "commit": True}

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from airflow_idempotent_jobs import open_store
    from airflow_idempotent_jobs.stores.pg_session import PostgresSession

    url, point = sys.argv[1], sys.argv[2]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def after(name, extra=None):
        original = getattr(PostgresSession, name)
        def wrapped(self, *args):
            result = original(self, *args)
            if extra is not None:
                extra(self)
            die()
            return result
        setattr(PostgresSession, name, wrapped)

    if point == "insert_sent":
        after("insert", extra=lambda session: session.write())  # the INSERT reaches the server, no COMMIT
    else:
        after(point)
    with open_store(url) as store:
        store.allocate("2026-W32", "run-crash")
    sys.exit("the child was not killed")
    """
)


@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_at_each_step_leaves_nothing_half_written(pg_database: str, point: str) -> None:
    with open_store(pg_database) as store:
        store.allocate("2026-W32", "run-before")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, pg_database, point], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == -signal.SIGKILL, child.stderr

    with open_store(pg_database) as store:
        committed = store.find("run-crash")
        assert (committed is not None) == POINTS[point]
        assert check_store(store) == []
        retried = store.allocate("2026-W32", "run-crash")
        assert retried.reused == POINTS[point]
        assert retried.episode_id == "2026-W32-1"
        after = store.allocate("2026-W32", "run-after")
        assert after.episode_id == "2026-W32-2"
        assert [e.allocation_key for e in store.list("2026-W32")] == ["run-before", "run-crash", "run-after"]
        assert check_store(store) == []
