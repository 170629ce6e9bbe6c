"""A PostgreSQL server that stops answering never hangs the store: `StoreUnavailable` within its bound.

Real stops: our own backend SIGSTOPped before its allocation call arrives, inside the call with the
namespace's lock held, mid-ledger-update and mid-read (a stopped backend cannot run its
statement_timeout nor answer a cancel request: only the client's own bound ends the wait); a lock
holder that never commits (another session, or a client of ours frozen inside its transaction);
the postmaster stopped (new connections are accepted by the kernel and never answered). Each call
ends with `StoreUnavailable` within the configured bound, and after SIGCONT a later call works and
leaves no duplicate.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import StoreUnavailable, SubmissionState
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.identity import EpisodeId
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _allocate as pg_allocate
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from airflow_idempotent_jobs.stores.postgres._connection import ANSWER_GRACE
from tests.clirun import run_cli
from tests.pg_stopped import backends, postmaster_pid, stopped, wait_for, wait_gone

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

LOCK, STATEMENT = 0.5, 1.0
#: The client's bound on one answer: lock_timeout + statement_timeout + the grace.
BOUND = LOCK + STATEMENT + ANSWER_GRACE
#: What a loaded 2-core machine may add to a bound before we call it a hang.
SLACK = 3.0
SPAWN = multiprocessing.get_context("spawn")
#: The frozen client's statement_timeout: its idle session outlives the others' first lock wait.
FROZEN_STATEMENT = 3.0


@pytest.fixture
def admin(pg_database: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        yield conn


def _dbname(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?", 1)[0]


def _open(url: str, **options: Any) -> PostgresEpisodeStore:
    options.setdefault("lock_timeout", LOCK)
    options.setdefault("statement_timeout", STATEMENT)
    return PostgresEpisodeStore(url, **options)


def _timed(call: Callable[[], Any]) -> tuple[float, BaseException | None]:
    start = time.monotonic()
    try:
        call()
    except BaseException as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def _assert_unavailable(elapsed: float, exc: BaseException | None, bound: float, mention: str) -> None:
    assert isinstance(exc, StoreUnavailable), repr(exc)
    assert mention in str(exc), str(exc)
    assert elapsed <= bound + SLACK, f"took {elapsed:.2f}s, bound {bound:g}s"


def _move(state: SubmissionState) -> Callable[[Episode], Episode]:
    def change(episode: Episode) -> Episode:
        return dataclasses.replace(
            episode, submission=episode.submission.moved_to(state, episode_id=episode.episode_id)
        )

    return change


def _no_duplicates(url: str) -> list[str]:
    with PostgresEpisodeStore(url) as store:
        assert check_store(store) == []
        episodes = store.list()
    keys = [e.allocation_key for e in episodes]
    assert len(keys) == len(set(keys)), keys
    return [e.episode_id for e in episodes]


def test_our_backend_stopped_before_the_call_reaches_it(
    pg_database: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped right before the allocation's one call is sent: it cannot answer, only the client's bound ends it."""
    store = _open(pg_database)
    store.allocate("2026-W32", "before")
    stops: list[int] = []
    original = pg_allocate._send

    def stop_then(conn: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
        pid = conn.info.backend_pid
        stops.append(pid)
        with stopped(pid):
            started = time.monotonic()
            try:
                return original(conn, *args, **kwargs)
            finally:
                stops.append(round((time.monotonic() - started) * 1000))

    monkeypatch.setattr(pg_allocate, "_send", stop_then)
    elapsed, exc = _timed(lambda: store.allocate("2026-W32", "run-1"))
    monkeypatch.undo()
    _assert_unavailable(elapsed, exc, BOUND, "did not answer")
    pid, stalled_ms = stops
    assert BOUND - 0.2 <= stalled_ms / 1000 <= BOUND + SLACK, stalled_ms
    wait_gone(admin, pid)
    # After SIGCONT the backend read the call that was in its socket, perhaps ran it, and met the end
    # of the stream: the retry finds the episode or allocates it, never both.
    retry = store.allocate("2026-W32", "run-1")
    assert retry.episode_id == "2026-W32-1"
    assert store.allocate("2026-W32", "after").episode_id == "2026-W32-2"
    store.close()
    assert _no_duplicates(pg_database) == ["2026-W32-0", "2026-W32-1", "2026-W32-2"]


def test_our_backend_stopped_inside_the_call_with_the_lock_held(
    pg_database: str, admin: psycopg.Connection[Any]
) -> None:
    """Stopped inside allocate_episode, holding the namespace's lock: the others are bounded by lock_timeout."""
    lock = 3.0  # the stopped call's own wait: long enough for the test to find it and stop it first
    store = _open(pg_database, lock_timeout=lock)
    store.allocate("2026-W32", "before")
    outcome: list[tuple[float, BaseException | None]] = []
    with psycopg.connect(pg_database) as holder:
        # A row lock on the week's mark: the call takes the advisory lock, then waits here for the mark.
        holder.execute("SELECT 1 FROM idempotent_jobs.weeks WHERE week_id = '2026-W32' FOR UPDATE")
        caller = threading.Thread(target=lambda: outcome.append(_timed(lambda: store.allocate("2026-W32", "run-1"))))
        caller.start()
        waiting = "wait_event_type = 'Lock' AND wait_event <> 'advisory'"
        (pid,) = wait_for(lambda: backends(admin, _dbname(pg_database), waiting), what="the call inside the function")
        held = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = %s AND locktype = 'advisory' AND granted", (pid,)
        ).fetchone()
        assert held == (1,), "the stopped call holds the namespace's lock"
        with stopped(pid):
            other = _open(pg_database)
            elapsed, exc = _timed(lambda: other.allocate("2026-W33", "run-2"))
            _assert_unavailable(elapsed, exc, LOCK, "could not lock")
            other.close()
            holder.rollback()
            caller.join(timeout=60)
    elapsed, exc = outcome[0]
    _assert_unavailable(elapsed, exc, lock + STATEMENT + ANSWER_GRACE, "did not answer")
    wait_gone(admin, pid)
    retry = store.allocate("2026-W32", "run-1")
    assert retry.episode_id == "2026-W32-1"
    assert store.allocate("2026-W33", "run-2").episode_id == "2026-W33-0"
    store.close()
    assert _no_duplicates(pg_database) == ["2026-W32-0", "2026-W32-1", "2026-W33-0"]


def test_our_backend_stopped_mid_ledger_update(pg_database: str, admin: psycopg.Connection[Any]) -> None:
    store = _open(pg_database)
    episode = store.allocate("2026-W32", "run-1")
    dbname = _dbname(pg_database)
    stops: list[int] = []

    def stop_inside(current: Episode) -> Episode:
        # The change runs under the lock, inside the transaction: our session is idle in it.
        (pid,) = backends(admin, dbname, "state = 'idle in transaction'")
        stops.append(pid)
        resume.enter_context(stopped(pid))
        return _move(SubmissionState.SUBMITTING)(current)

    with ExitStack() as resume:
        elapsed, exc = _timed(lambda: store.update(episode.episode_id, stop_inside))
    _assert_unavailable(elapsed, exc, BOUND, "did not answer")
    wait_gone(admin, stops[0])
    # The UPDATE reached the stopped backend but its transaction never committed.
    assert store.get(episode.episode_id).submission.state is SubmissionState.NONE
    moved = store.update(episode.episode_id, _move(SubmissionState.SUBMITTING))
    assert moved.submission.state is SubmissionState.SUBMITTING
    assert [h["to"] for h in store.get(episode.episode_id).submission.history] == ["submitting"]
    store.close()
    assert _no_duplicates(pg_database) == ["2026-W32-0"]


@pytest.mark.parametrize("read", ["get", "list", "find"])
def test_our_backend_stopped_mid_read(pg_database: str, admin: psycopg.Connection[Any], read: str) -> None:
    """A read held up by a table lock, then its backend stopped: its lock_timeout can no longer fire."""
    lock = 3.0  # long enough for this test to find the waiting backend and stop it first
    store = _open(pg_database, lock_timeout=lock)
    episode = store.allocate("2026-W32", "run-1")
    calls: dict[str, Callable[[], Any]] = {
        "get": lambda: store.get(episode.episode_id),
        "list": store.list,
        "find": lambda: store.find("run-1"),
    }
    outcome: list[tuple[float, BaseException | None]] = []
    with psycopg.connect(pg_database) as holder:
        holder.execute("LOCK TABLE idempotent_jobs.episodes IN ACCESS EXCLUSIVE MODE")
        reader = threading.Thread(target=lambda: outcome.append(_timed(calls[read])))
        reader.start()
        (pid,) = wait_for(lambda: backends(admin, _dbname(pg_database), "wait_event_type = 'Lock'"), what="the read")
        with stopped(pid):
            holder.commit()
            reader.join(timeout=60)
    elapsed, exc = outcome[0]
    _assert_unavailable(elapsed, exc, lock + STATEMENT + ANSWER_GRACE, "did not answer")
    assert elapsed >= lock + STATEMENT, "it ended before the bound: not the client's bound that ended it"
    wait_gone(admin, pid)
    assert store.get(episode.episode_id) == episode
    assert [e.episode_id for e in store.list()] == ["2026-W32-0"]
    store.close()


def test_a_table_lock_holder_that_never_commits_bounds_reads(pg_database: str) -> None:
    """Reads run under lock_timeout too: a holder of an exclusive table lock must not hang them for ever."""
    store = _open(pg_database)
    episode = store.allocate("2026-W32", "run-1")
    with psycopg.connect(pg_database) as holder:
        holder.execute("LOCK TABLE idempotent_jobs.episodes IN ACCESS EXCLUSIVE MODE")
        for call in (lambda: store.get(episode.episode_id), store.list, lambda: store.find("run-1")):
            elapsed, exc = _timed(call)
            _assert_unavailable(elapsed, exc, LOCK, "could not lock")
        holder.rollback()
    assert store.get(episode.episode_id) == episode
    store.close()


def test_a_row_lock_holder_that_never_commits_bounds_ledger_updates(pg_database: str) -> None:
    store = _open(pg_database)
    episode = store.allocate("2026-W32", "run-1")
    with psycopg.connect(pg_database) as holder:
        holder.execute("SELECT 1 FROM idempotent_jobs.episodes WHERE episode_id = %s FOR UPDATE", (episode.episode_id,))
        elapsed, exc = _timed(lambda: store.update(episode.episode_id, _move(SubmissionState.SUBMITTING)))
        _assert_unavailable(elapsed, exc, LOCK, "could not lock")
        holder.rollback()
    assert store.update(episode.episode_id, _move(SubmissionState.SUBMITTING)).submission.state.value == "submitting"
    store.close()


def test_the_cli_with_an_advisory_lock_holder_and_its_backend_stopped(
    pg_database: str, admin: psycopg.Connection[Any]
) -> None:
    """The whole command: bounds from the URL, a lock held elsewhere, then the command's own backend stopped."""
    lock, statement = 3.0, 1.0
    url = f"{pg_database}?lock_timeout={lock:g}&statement_timeout={statement:g}"
    key = pg_schema.advisory_key("namespace", "idempotent_jobs", "default")
    results: list[tuple[float, Any]] = []
    with psycopg.connect(pg_database, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        args = ("--store", url, "allocate", "--week", "2026-W32", "--key", "k")
        command = threading.Thread(target=lambda: results.append(_timed_cli(args)))
        command.start()
        waiting = "wait_event_type = 'Lock' AND wait_event = 'advisory'"
        (pid,) = wait_for(lambda: backends(admin, _dbname(pg_database), waiting), what="the command's lock wait")
        with stopped(pid):
            command.join(timeout=60)
    elapsed, done = results[0]
    assert (done.code, done.stdout) == (5, ""), done
    line = done.error_line()
    assert "did not answer within" in line, line
    assert elapsed <= lock + statement + ANSWER_GRACE + SLACK + 2.0, elapsed  # + the interpreter's start
    wait_gone(admin, pid)
    again = run_cli("--store", url, "allocate", "--week", "2026-W32", "--key", "k")
    assert (again.code, again.stdout) == (0, "2026-W32-0\n"), again.stderr
    assert _no_duplicates(pg_database) == ["2026-W32-0"]


def _timed_cli(args: tuple[str, ...]) -> tuple[float, Any]:
    start = time.monotonic()
    done = run_cli(*args)
    return time.monotonic() - start, done


def _frozen_client(url: str, entered: Any) -> None:
    """A client of ours that takes the namespace's lock and is then frozen (the test stops it)."""
    with _open(url, statement_timeout=FROZEN_STATEMENT) as store, store._session() as session:
        session.load(EpisodeId.parse("2026-W32-0"))
        entered.set()
        time.sleep(120)


def test_a_client_of_ours_frozen_inside_its_transaction_loses_its_session(
    pg_database: str, admin: psycopg.Connection[Any]
) -> None:
    """idle_in_transaction_session_timeout: the others time out for a while, then get the lock back."""
    entered = SPAWN.Event()
    child = SPAWN.Process(target=_frozen_client, args=(pg_database, entered))
    child.start()
    try:
        assert entered.wait(timeout=60)
        assert child.pid is not None
        with stopped(child.pid):
            frozen_at = time.monotonic()
            store = _open(pg_database)
            elapsed, exc = _timed(lambda: store.allocate("2026-W32", "k"))
            _assert_unavailable(elapsed, exc, LOCK, "could not lock")
            # The server ends the frozen client's session after its lock_timeout + statement_timeout idle.
            got = wait_for(lambda: _try_allocate(store, "k"), timeout=30, what="the lock to come back")
            assert time.monotonic() - frozen_at <= LOCK + FROZEN_STATEMENT + SLACK
            assert got == "2026-W32-0"
            store.close()
    finally:
        child.kill()
        child.join(timeout=30)
    assert _no_duplicates(pg_database) == ["2026-W32-0"]


def _try_allocate(store: PostgresEpisodeStore, key: str) -> str | None:
    try:
        return store.allocate("2026-W32", key).episode_id
    except StoreUnavailable:
        return None


def test_a_stopped_postmaster_fails_new_connections_within_connect_timeout(
    pg_database: str, admin: psycopg.Connection[Any]
) -> None:
    """The kernel accepts the connection, nobody answers: connect_timeout ends it. Pooled sessions still work."""
    warm = _open(pg_database)
    warm.allocate("2026-W32", "before")
    postmaster = postmaster_pid(admin)
    with stopped(postmaster):
        cold = _open(pg_database, connect_timeout=2)
        elapsed, exc = _timed(lambda: cold.allocate("2026-W32", "k"))
        # Its backend is a process of its own: the warm store's pooled session is not held up.
        assert warm.get("2026-W32-0").allocation_key == "before"
    _assert_unavailable(elapsed, exc, 2.0, "unavailable")
    assert cold.allocate("2026-W32", "k").episode_id == "2026-W32-1"
    cold.close()
    warm.close()
    assert _no_duplicates(pg_database) == ["2026-W32-0", "2026-W32-1"]
