"""Crash consistency of the PostgreSQL store: the allocating process SIGKILLed around its one call.

An allocation is one call of ``allocate_episode`` (one round trip, its own transaction). The child
wraps the store's seams in its own process (no production hook) and kills itself: right before
the call is sent (nothing can be committed); after the call's bytes were sent, before its answer
is read (the server may or may not have committed: it commits whatever the client does next, so
the retry must reuse the episode if and only if it is there), the same while another session
holds the namespace's lock (the call runs, and commits, only after the client is dead); and after
the answer arrived, before ``allocate`` returns (committed). Each time the retry in a fresh
process gets exactly one episode, the next allocation the next sequence, and `check` finds nothing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from airflow_idempotent_jobs.verify import check_store
from tests.pg_stopped import backends, wait_for

pytestmark = pytest.mark.postgres

#: Where the child dies, and whether the episode is committed by then (None: either, the retry must agree).
POINTS: dict[str, bool | None] = {
    "before_send": False,
    "sent_unanswered": None,
    "sent_while_locked": True,
    "answered": True,
}

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from psycopg.waiting import Wait
    from airflow_idempotent_jobs import open_store
    from airflow_idempotent_jobs.stores.postgres import _allocate as pg_allocate
    from airflow_idempotent_jobs.stores.postgres._connection import BoundedConnection

    url, point = sys.argv[1], sys.argv[2]
    armed = []

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    send, call, wait = pg_allocate._send, pg_allocate.call, BoundedConnection.wait

    def before_send(*args, **kwargs):
        die()

    def sending(*args, **kwargs):
        armed.append(True)
        return send(*args, **kwargs)

    def answered(*args, **kwargs):
        result = call(*args, **kwargs)
        die()
        return result

    def spy(gen):
        # psycopg asks to wait for reading only once libpq flushed the whole query to the socket.
        try:
            state = next(gen)
            while True:
                if armed and state == Wait.R:
                    die()
                state = gen.send((yield state))
        except StopIteration as stop:
            return stop.value

    def spied_wait(self, gen, *args, **kwargs):
        return wait(self, spy(gen), *args, **kwargs)

    if point == "before_send":
        pg_allocate._send = before_send
    elif point == "answered":
        pg_allocate.call = answered
    else:
        pg_allocate._send = sending
        BoundedConnection.wait = spied_wait
    with open_store(url) as store:
        store.allocate("2026-W32", "run-crash")
    sys.exit("the child was not killed")
    """
)


def _dbname(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_around_the_call_leaves_one_episode_or_none(pg_database: str, point: str) -> None:
    with open_store(pg_database) as store:
        store.allocate("2026-W32", "run-before")
    key = pg_schema.advisory_key("namespace", "idempotent_jobs", "default")
    with psycopg.connect(pg_database, autocommit=True) as admin:
        if point == "sent_while_locked":
            admin.execute("SELECT pg_advisory_lock(%s)", (key,))
        child = subprocess.run(
            [sys.executable, "-c", CHILD, pg_database, point], capture_output=True, text=True, timeout=60
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        if point == "sent_while_locked":
            # The dead client's call is queued on the lock, in the server (once its backend read it:
            # on a loaded machine that can come a moment after the client is gone).
            waiting = "wait_event_type = 'Lock' AND wait_event = 'advisory'"
            wait_for(lambda: backends(admin, _dbname(pg_database), waiting), what="the call to reach the server")
            admin.execute("SELECT pg_advisory_unlock(%s)", (key,))
        # The server notices the dead client only when it answers: wait until its session is gone.
        wait_for(lambda: not backends(admin, _dbname(pg_database)), what="the child's session to end")
    _assert_one_episode(pg_database, POINTS[point])


def _assert_one_episode(url: str, committed: bool | None) -> Any:
    with open_store(url) as store:
        found = store.find("run-crash")
        if committed is not None:
            assert (found is not None) == committed
        assert check_store(store) == []
        retried = store.allocate("2026-W32", "run-crash")
        assert retried.reused == (found is not None)
        assert retried.episode_id == "2026-W32-1"
        after = store.allocate("2026-W32", "run-after")
        assert after.episode_id == "2026-W32-2"
        assert [e.allocation_key for e in store.list("2026-W32")] == ["run-before", "run-crash", "run-after"]
        assert check_store(store) == []
