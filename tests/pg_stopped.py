"""Stop a PostgreSQL process for a test (SIGSTOP), and make sure it always runs again.

A stopped backend cannot run its own statement_timeout nor answer a cancel request; a stopped
postmaster accepts TCP connections (the kernel does) and never answers them. The tests run as
root on the server's host, so they can stop either. Every stop is undone in a ``finally``, and a
guardian process started before the stop sends SIGCONT after ``GUARD`` seconds anyway, so that
even a test runner killed mid-test never leaves the shared server stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

__all__ = ["GUARD", "backends", "postmaster_pid", "stopped", "wait_for", "wait_gone"]

#: Seconds after which the guardian resumes a stopped process whatever happened to the test.
GUARD = 30


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """``pid`` stopped for the body of the ``with``; resumed on the way out (and by a guardian)."""
    guardian = subprocess.Popen(
        ["sh", "-c", f"sleep {GUARD}; kill -CONT {pid:d}"], start_new_session=True, stdout=subprocess.DEVNULL
    )
    try:
        os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
        guardian.kill()
        guardian.wait()


def backends(admin: psycopg.Connection[Any], dbname: str, where: str = "true") -> list[int]:
    """Pids of the store's sessions (application_name ``idempotent-jobs``) in ``dbname``, matching ``where``."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'idempotent-jobs' "
        f"AND pid <> pg_backend_pid() AND ({where}) ORDER BY pid",
        (dbname,),
    ).fetchall()
    return [int(pid) for (pid,) in rows]


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def wait_gone(admin: psycopg.Connection[Any], pid: int, timeout: float = 20.0) -> None:
    """Wait until backend ``pid`` has exited (after SIGCONT it reads the closed socket and ends)."""

    def gone() -> bool:
        return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() == (0,)

    wait_for(gone, timeout, f"backend {pid} to exit")


def postmaster_pid(admin: psycopg.Connection[Any]) -> int:
    row = admin.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'").fetchone()
    assert row is not None
    return int((Path(row[0]) / "postmaster.pid").read_text().splitlines()[0])
