"""Where each store can be killed in the middle of one allocation, and how (for tests/stores/test_crash.py).

A plan gives the kill points of one allocation of ``KEY`` in a week of a store with history, each
on a store of its own, and kills a child process there with a real SIGKILL:

- `FileCrashes`: before each ``os`` call of the allocation's write (counted by tests/crash_child.py,
  which wraps the calls; no production hook). The commit point is the append of the episode's entry
  to the week's history: a kill after it leaves an episode known only from its entry.
- `PostgresCrashes`: around the allocation's one call of ``allocate_episode`` (its own transaction):
  right before the call is sent (nothing committed); after its bytes were sent, before its answer is
  read (the server may or may not commit: the retry must agree with whatever it did); the same while
  another session holds the namespace's lock (the call runs, and commits, only after the client is
  dead); and after the answer arrived, before ``allocate`` returns (committed).

After the kills, `after` runs ONE fresh process that, for each killed store, runs ``idempotent-jobs
check`` (the CLI's ``main``), looks the key up and retries it.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psycopg

from airflow_idempotent_jobs import FileEpisodeStore, open_store
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.clirun import CHILD_TIMEOUT
from tests.pg import PgServer, pg_url
from tests.pg_stopped import backends, wait_for

__all__ = ["HISTORY", "KEY", "Crash", "CrashPlan", "Crashes", "FileCrashes", "PostgresCrashes", "after", "crash_child"]

KEY = "airflow:weekly:allocate:scheduled__2026-08-03"
CRASH_CHILD = Path(__file__).parents[1] / "crash_child.py"
#: Every killed store starts with this history: two episodes in 2026-W32, one in 2026-W33.
HISTORY = [("2026-W32", "earlier-0"), ("2026-W32", "earlier-1"), ("2026-W33", "earlier-2")]


@dataclass(frozen=True)
class Crash:
    """One kill point: its name, the store it kills (a path or URL), and whether the allocation had
    committed by then (None: it may have or not, the retry must agree with the store)."""

    where: str
    store: str
    committed: bool | None


@dataclass(frozen=True)
class CrashPlan:
    """The kill points of one allocation of ``KEY`` in ``week``, and the episode it allocates."""

    week: str
    expected_id: str
    crashes: list[Crash]


class Crashes(Protocol):
    def plan(self, week: str) -> CrashPlan: ...

    def kill(self, week: str, crash: Crash) -> None:
        """Kill a child allocating ``KEY`` at ``crash``; return once the store is left as it died."""


def seed(store_url: str) -> None:
    with open_store(store_url) as store:
        for week, key in HISTORY:
            store.allocate(week, key)


def crash_child(*args: str) -> subprocess.CompletedProcess[str]:
    """tests/crash_child.py with ``args``, in a process of its own (bounded by CHILD_TIMEOUT)."""
    return subprocess.run(
        [sys.executable, str(CRASH_CHILD), *args], capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False
    )


def after(week: str, crashes: list[Crash]) -> dict[str, tuple[int, bool, str, bool]]:
    """For each crash's store, in ONE fresh process: ``check``'s exit code, whether ``KEY`` was held
    before the retry, and the retry's episode id and ``reused``."""
    done = crash_child("--after", week, KEY, *(c.store for c in crashes))
    assert done.returncode == 0, done.stderr
    found: dict[str, tuple[int, bool, str, bool]] = {}
    for line in (line for line in done.stdout.splitlines() if line.count("\t") == 4):  # check's findings too
        store, checked, held, episode_id, reused = line.split("\t")
        found[store] = (int(checked), held == "True", episode_id, reused == "True")
    return found


# -- the file store -------------------------------------------------------------------------------
def file_child(root: Path | str, week: str, kill_at: int) -> subprocess.CompletedProcess[str]:
    return crash_child(str(root), week, KEY, str(kill_at))


def copy_file_store(base: Path, root: Path) -> None:
    """A copy of ``base`` with its index built there, as after the copy's first locked call.

    A copied index is verified against the weeks and rebuilt on first use
    (tests/stores/file/test_restore.py kills that rebuild); these kills are of the allocation itself.
    """
    shutil.copytree(base, root)
    FileEpisodeStore(root).rebuild_index()


class FileCrashes:
    """Kills before each file-system step of one allocation, each on a copy of ``base``."""

    def __init__(self, base: Path, work: Path) -> None:
        self.base, self.work = base, work
        self.steps: list[str] = []

    def steps_of_one_allocation(self, week: str) -> tuple[list[str], str]:
        """Every step of one allocation on a copy of the base, and the id it allocates."""
        probe = self.work / "probe"
        copy_file_store(self.base, probe)
        done = file_child(probe, week, 0)
        assert done.returncode == 0, done.stderr
        *steps, result = done.stdout.splitlines()
        _, episode_id, reused = result.split("\t")
        assert reused == "False"
        shutil.rmtree(probe)
        return steps, episode_id

    def plan(self, week: str) -> CrashPlan:
        steps, expected_id = self.steps_of_one_allocation(week)
        # The commit point is the write that appends the episode's entry to the week's history (then
        # fdatasynced): the first write after the history is last opened.
        history = f"open\t{self.work}/probe/episodes/{week}/history.jsonl"
        appended = max(n for n, step in enumerate(steps, 1) if step == history)
        commit = next(n for n, step in enumerate(steps, 1) if n > appended and step == "write\t")
        assert steps[commit] == "fdatasync\t" or steps[commit] == "fsync\t"
        assert 5 < commit < len(steps)
        self.steps = steps
        crashes = [
            Crash(f"{kill_at}:{steps[kill_at - 1]}", str(self.work / f"k{kill_at}"), kill_at > commit)
            for kill_at in range(1, len(steps) + 1)
        ]
        return CrashPlan(week, expected_id, crashes)

    def kill(self, week: str, crash: Crash) -> None:
        copy_file_store(self.base, Path(crash.store))
        killed = file_child(crash.store, week, int(crash.where.split(":", 1)[0]))
        assert killed.returncode == -signal.SIGKILL, (crash.where, killed.stderr)


# -- PostgreSQL -----------------------------------------------------------------------------------
#: Where the child dies, and whether the episode is committed by then (None: either).
PG_POINTS: dict[str, bool | None] = {
    "before_send": False,
    "sent_unanswered": None,
    "sent_while_locked": True,
    "answered": True,
}

PG_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from psycopg.waiting import Wait
    from airflow_idempotent_jobs import open_store
    from airflow_idempotent_jobs.stores.postgres import _allocate as pg_allocate
    from airflow_idempotent_jobs.stores.postgres._connection import BoundedConnection

    url, point, week, key = sys.argv[1:5]
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
        store.allocate(week, key)
    sys.exit("the child was not killed")
    """
)


class PostgresCrashes:
    """Kills around the one call of one allocation, each in a database of its own (dropped by `close`)."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self.names: list[str] = []

    def plan(self, week: str) -> CrashPlan:
        crashes = []
        for point, committed in PG_POINTS.items():
            name = self.server.create()
            self.names.append(name)
            seed(pg_url(name))
            crashes.append(Crash(point, pg_url(name), committed))
        with open_store(crashes[0].store) as store:
            held = store.list(week)
        return CrashPlan(week, f"{week}-{len(held)}", crashes)

    def kill(self, week: str, crash: Crash) -> None:
        dbname = crash.store.rsplit("/", 1)[1]
        key = pg_schema.advisory_key("namespace", "idempotent_jobs", "default")
        with psycopg.connect(crash.store, autocommit=True) as admin:
            if crash.where == "sent_while_locked":
                admin.execute("SELECT pg_advisory_lock(%s)", (key,))
            child = subprocess.run(
                [sys.executable, "-c", PG_CHILD, crash.store, crash.where, week, KEY],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert child.returncode == -signal.SIGKILL, child.stderr
            if crash.where == "sent_while_locked":
                # The dead client's call is queued on the lock, in the server (once its backend read it:
                # on a loaded machine that can come a moment after the client is gone).
                waiting = "wait_event_type = 'Lock' AND wait_event = 'advisory'"
                wait_for(lambda: backends(admin, dbname, waiting), what="the call to reach the server")
                admin.execute("SELECT pg_advisory_unlock(%s)", (key,))
            # The server notices the dead client only when it answers: wait until its session is gone.
            wait_for(lambda: not backends(admin, dbname), what="the child's session to end")

    def close(self) -> None:
        for name in self.names:
            self.server.drop(name)
