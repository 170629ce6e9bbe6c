"""PostgreSQL store under real concurrency: many processes, and a connection killed mid-allocation."""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections import Counter
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import StoreUnavailable, open_store
from tests.pg import spawn_together

pytestmark = pytest.mark.postgres

WEEKS = ("2020-W52", "2020-W53", "2021-W01", "2026-W32")
WORKERS = 16
PER_WORKER = 50
SPAWN = multiprocessing.get_context("spawn")


def _allocate_many(url: str, worker: int, barrier: Any, results: Any) -> None:
    """One client process: 50 allocations spread over the 4 weeks, started together with the others."""
    try:
        with open_store(url) as store:
            barrier.wait(timeout=60)
            got = [
                (f"w{worker}-{i}", store.allocate(WEEKS[(worker + i) % len(WEEKS)], f"w{worker}-{i}").episode_id)
                for i in range(PER_WORKER)
            ]
        results.put((worker, got))
    except BaseException as exc:  # report everything: the parent asserts on it
        results.put((worker, f"{type(exc).__name__}: {exc}"))


def test_16_processes_x_50_allocations_are_contiguous_per_week(pg_database: str) -> None:
    answers = dict(spawn_together(_allocate_many, [(pg_database, w) for w in range(WORKERS)], timeout=120))
    failures = {w: a for w, a in answers.items() if isinstance(a, str)}
    assert not failures
    returned = {key: episode_id for got in answers.values() for key, episode_id in got}
    assert len(returned) == WORKERS * PER_WORKER
    assert len(set(returned.values())) == WORKERS * PER_WORKER, "an episode id was handed out twice"

    with open_store(pg_database) as store:
        stored = store.list()
        assert {e.allocation_key: e.episode_id for e in stored} == returned
        per_week = Counter(e.week_id for e in stored)
        for week in WEEKS:
            sequences = sorted(e.sequence for e in stored if e.week_id == week)
            assert sequences == list(range(per_week[week])), f"{week} is not contiguous"
        assert sum(per_week.values()) == WORKERS * PER_WORKER
        # Every key, asked again, gets its own episode back.
        again = store.allocate(WEEKS[0], "w0-0")
        assert (again.episode_id, again.reused) == (returned["w0-0"], True)


def _victim(url: str, key: str, paused: Any, results: Any) -> None:
    """Allocate; the test's gate holds the call inside the server with its rows written and not committed."""
    paused.set()
    try:
        with open_store(url) as store:
            episode = store.allocate("2026-W32", key)
        results.put(f"allocated {episode.episode_id}")
    except StoreUnavailable as exc:
        results.put(f"StoreUnavailable: {exc}")
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


#: A test-only trigger: an episode row for key 'run-1' waits, once inserted, for the gate row's lock.
GATE = """
CREATE TABLE public.gate (id integer PRIMARY KEY);
INSERT INTO public.gate VALUES (1);
CREATE FUNCTION public.wait_at_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.allocation_key = 'run-1' THEN
        PERFORM 1 FROM public.gate FOR UPDATE;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER wait_at_gate AFTER INSERT ON idempotent_jobs.episodes
    FOR EACH ROW EXECUTE FUNCTION public.wait_at_gate();
"""


def _wait_for_waiting_lock(conn: psycopg.Connection[Any]) -> None:
    for _ in range(600):
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
        if row and row[0]:
            return
        threading.Event().wait(0.05)
    raise AssertionError("the second client never queued behind the advisory lock")


def _count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM idempotent_jobs.{table}").fetchone()
    assert row is not None
    return int(row[0])


def test_connection_killed_mid_allocation_leaves_nothing_and_the_retry_gets_one_episode(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute(GATE)
    gate = psycopg.connect(pg_database)
    gate.execute("SELECT 1 FROM public.gate FOR UPDATE")
    paused, results = SPAWN.Event(), SPAWN.Queue()
    proc = SPAWN.Process(target=_victim, args=(pg_database, "run-1", paused, results))
    proc.start()
    waiter_result: queue.Queue[object] = queue.Queue()
    try:
        assert paused.wait(timeout=60), "the victim never started"
        with psycopg.connect(pg_database, autocommit=True) as admin:
            for _ in range(600):  # until the victim's call waits at the gate, its rows written
                at_gate = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event <> 'advisory'"
                    " AND datname = current_database()"
                ).fetchone()
                if at_gate and at_gate[0]:
                    break
                threading.Event().wait(0.05)
            # The victim holds the namespace's advisory lock, with its rows written but not committed.
            holders = admin.execute(
                "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
            ).fetchall()
            assert len(holders) == 1
            # Its INSERT went through (it holds the row lock an insert takes), yet nothing is visible.
            wrote = admin.execute(
                "SELECT count(*) FROM pg_locks WHERE pid = %s AND mode = 'RowExclusiveLock' "
                "AND relation = 'idempotent_jobs.episodes'::regclass",
                (holders[0][0],),
            ).fetchone()
            assert wrote == (1,)
            assert (_count(admin, "episodes"), _count(admin, "weeks")) == (0, 0)

            # Another client queues behind the lock meanwhile.
            def wait_for_lock() -> None:
                with open_store(pg_database) as other:
                    waiter_result.put(other.allocate("2026-W32", "run-2").episode_id)

            waiter = threading.Thread(target=wait_for_lock, daemon=True)
            waiter.start()
            _wait_for_waiting_lock(admin)
            killed = admin.execute("SELECT pg_terminate_backend(%s)", (holders[0][0],)).fetchone()
            assert killed == (True,)
            outcome = results.get(timeout=60)
            waiter.join(timeout=60)
            assert outcome.startswith("StoreUnavailable: "), outcome
            # Nothing of the victim survived; the waiter got the lock and sequence 0.
            assert waiter_result.get(timeout=1) == "2026-W32-0"
            assert (_count(admin, "episodes"), _count(admin, "weeks")) == (1, 1)
    finally:
        gate.close()
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()

    with open_store(pg_database) as store:
        retry = store.allocate("2026-W32", "run-1")
        assert (retry.episode_id, retry.reused) == ("2026-W32-1", False)
        assert store.allocate("2026-W32", "run-1").reused
        assert [e.allocation_key for e in store.list()] == ["run-2", "run-1"]
