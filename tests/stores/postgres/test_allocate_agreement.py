"""The allocation rule has two statements, Python's (`allocation.decide` + the next-sequence rule) and
the server's (``allocate_episode``, migration 0004): one table of cases runs through both and they agree.

Each case seeds the same rows in two namespaces of one database. The Python side is the store
port's own `EpisodeStore.allocate` (decide, the week's high-water mark, new_episode, insert, in
the locked transaction of `PostgresSession`, with the allocation primitives that
`tests.stores.postgres.python_rule_store` adds to it); the server side is `PostgresEpisodeStore.allocate` (one
call). Both must give the same episode (id, reuse, record) or the same error (type, message,
ids), and that answer must be the one the case expects.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from airflow_idempotent_jobs import AllocationConflict, StoreCorrupted
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import Owner
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.base import EpisodeStore
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _allocate as pg_allocate
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.pg import insert_episode
from tests.stores.postgres.python_rule_store import PythonRuleStore

pytestmark = pytest.mark.postgres

PYTHON, SERVER = "py-side", "sql-side"
LAST = 999_999_999


@dataclass(frozen=True)
class Case:
    """Rows already there, the call, and the answer both sides must give."""

    #: (week, sequence, key, fingerprint) of each seeded episode, in both namespaces.
    rows: tuple[tuple[str, int, str, str | None], ...]
    call: tuple[str, str, str | None]
    #: An episode id, "reused <id>", or "<ErrorType>: <part of its message>".
    expect: str
    #: Weeks' high-water marks set after the rows (the mark ahead of, or behind, the rows).
    marks: dict[str, int] = field(default_factory=dict)
    #: Rows of another namespace: never holders, never counted.
    elsewhere: tuple[tuple[str, int, str, str | None], ...] = ()
    #: Drop the key's unique constraint first, so that several rows can hold one key.
    duplicates: bool = False
    #: The ids check names afterwards as having no row: a mark ahead of the rows is what rows
    #: deleted with the store's triggers off leave (a committed allocation always has its row).
    missing: tuple[str, ...] = ()


CASES = {
    "empty week": Case((), ("2026-W32", "k", None), "2026-W32-0"),
    "new week after history": Case(
        (("2026-W31", 0, "a", None), ("2026-W31", 1, "b", None)), ("2026-W32", "k", None), "2026-W32-0"
    ),
    "next in a used week": Case((("2026-W32", 0, "a", None),), ("2026-W32", "k", "fp"), "2026-W32-1"),
    "held, same week, same fingerprint": Case(
        (("2026-W32", 0, "a", None), ("2026-W32", 1, "k", "fp")), ("2026-W32", "k", "fp"), "reused 2026-W32-1"
    ),
    "held, same week, no fingerprint": Case(
        (("2026-W32", 0, "k", None),), ("2026-W32", "k", None), "reused 2026-W32-0"
    ),
    "held without fingerprint, asked with one": Case(
        (("2026-W32", 0, "k", None),), ("2026-W32", "k", "fp"), "AllocationConflict: fingerprint 'fp' differs"
    ),
    "held with fingerprint, asked without": Case(
        (("2026-W32", 0, "k", "fp"),), ("2026-W32", "k", None), "AllocationConflict: fingerprint None differs"
    ),
    "held in another week": Case(
        (("2026-W31", 0, "k", None),), ("2026-W32", "k", None), "AllocationConflict: already allocated in 2026-W31"
    ),
    "held in another week with another fingerprint": Case(
        (("2026-W31", 0, "k", "a"),), ("2026-W32", "k", "b"), "AllocationConflict: already allocated in 2026-W31"
    ),
    "held with another fingerprint": Case(
        (("2026-W32", 0, "k", "a"),), ("2026-W32", "k", "b"), "AllocationConflict: fingerprint 'b' differs"
    ),
    "held by several episodes": Case(
        (("2026-W32", 0, "k", None), ("2026-W32", 1, "k", None)),
        ("2026-W32", "k", None),
        "AllocationConflict: held by several episodes",
        duplicates=True,
    ),
    "held by several episodes in several weeks": Case(
        (("2026-W32", 0, "k", None), ("2026-W31", 0, "k", None), ("2026-W32", 10, "k", None)),
        ("2026-W32", "k", None),
        "AllocationConflict: held by several episodes",
        duplicates=True,
    ),
    "another namespace's holder is not one": Case(
        (("2026-W32", 0, "a", None),),
        ("2026-W32", "k", None),
        "2026-W32-1",
        elsewhere=(("2026-W31", 0, "k", None), ("2026-W32", 5, "x", None)),
    ),
    "mark behind max(sequence)": Case(
        tuple(("2026-W32", s, f"r{s}", None) for s in range(4)), ("2026-W32", "k", None), "2026-W32-4", {"2026-W32": 1}
    ),
    "mark ahead of max(sequence)": Case(
        (("2026-W32", 0, "a", None),),
        ("2026-W32", "k", None),
        "2026-W32-8",
        {"2026-W32": 7},
        missing=("2026-W32-1 to 2026-W32-7 (7 ids)",),
    ),
    "mark with no rows left": Case(
        (), ("2026-W32", "k", None), "2026-W32-4", {"2026-W32": 3}, missing=("2026-W32-0 to 2026-W32-3 (4 ids)",)
    ),
    "mark one below the last id": Case((), ("2026-W32", "k", None), f"2026-W32-{LAST}", {"2026-W32": LAST - 1}),
    "mark at 999 999 999": Case(
        (("2026-W32", 0, "a", None),), ("2026-W32", "k", None), "StoreCorrupted: out of range", {"2026-W32": LAST}
    ),
    "mark at 999 999 999, key held": Case(
        (("2026-W32", 0, "k", None),), ("2026-W32", "k", None), "reused 2026-W32-0", {"2026-W32": LAST}
    ),
}


def _seed(conn: psycopg.Connection[Any], namespace: str, rows: tuple[tuple[str, int, str, str | None], ...]) -> None:
    for week, sequence, key, fingerprint in rows:
        insert_episode(conn, namespace, new_episode(WeekId.parse(week), sequence, key, fingerprint))


def _prepare(url: str, case: Case) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        if case.duplicates:
            conn.execute("ALTER TABLE idempotent_jobs.episodes DROP CONSTRAINT episodes_allocation_key_key")
        for namespace in (PYTHON, SERVER):
            # As a store records it with its first write (a namespace never written has none yet).
            conn.execute(
                "INSERT INTO idempotent_jobs.store_identity (namespace, identity) VALUES (%s, md5(%s))",
                (namespace, namespace),
            )
            _seed(conn, namespace, case.rows)
            for week, mark in case.marks.items():
                conn.execute(
                    "INSERT INTO idempotent_jobs.weeks VALUES (%s, %s, %s)"
                    " ON CONFLICT (namespace, week_id) DO UPDATE SET highest_sequence = excluded.highest_sequence",
                    (namespace, week, mark),
                )
        _seed(conn, "elsewhere", case.elsewhere)


def _outcome(store: EpisodeStore, allocate: Any, call: tuple[str, str, str | None]) -> tuple[Any, ...]:
    """What one side answered, with its namespace and clock taken out."""
    try:
        episode = allocate(*call)
    except (AllocationConflict, StoreCorrupted) as exc:
        ids = exc.episode_ids if isinstance(exc, AllocationConflict) else exc.where
        return (
            type(exc).__name__,
            str(exc).replace(store.namespace, "<ns>"),
            str(ids).replace(store.namespace, "<ns>"),
        )
    record = episode.to_record()
    assert record["created_at"] == record["updated_at"]
    record["created_at"] = record["updated_at"] = "<now>"
    stored = store.get(episode.episode_id).to_record()
    stored["created_at"] = stored["updated_at"] = "<now>"
    return ("reused " if episode.reused else "") + episode.episode_id, record, stored


@pytest.mark.parametrize("name", list(CASES))
def test_python_rule_and_server_rule_agree(pg_database: str, name: str) -> None:
    case = CASES[name]
    _prepare(pg_database, case)
    with (
        PythonRuleStore(pg_database, namespace=PYTHON) as python,
        PostgresEpisodeStore(pg_database, namespace=SERVER) as server,
    ):
        by_python = _outcome(python, lambda *a: EpisodeStore.allocate(python, *a), case.call)
        by_server = _outcome(server, server.allocate, case.call)
        assert by_server == by_python
        # And the answer is the right one, not merely the same one.
        if ":" in case.expect:
            kind, part = case.expect.split(": ", 1)
            assert (by_server[0], part in by_server[1]) == (kind, True), by_server
        else:
            assert by_server[0] == case.expect
        # Asked again, both hand back what they gave (a retry), or refuse the same way again.
        again = _outcome(server, server.allocate, case.call)
        assert again == _outcome(python, lambda *a: EpisodeStore.allocate(python, *a), case.call)
        if not case.expect.startswith(("Allocation", "Store")):
            assert again[0] == "reused " + case.expect.removeprefix("reused ")
        if not case.duplicates and max(case.marks.values(), default=0) < LAST - 1:  # else check rightly objects
            for store in (server, python):
                found = [p.message.split(", though")[0] for p in check_store(store)]
                assert found == [f"no row and no tombstone for {ids}" for ids in case.missing]


def test_both_rules_record_the_owner_and_refuse_another_dag_alike(pg_database: str) -> None:
    """The owner rides in the new row either way; a reuse by another DAG is refused alike."""
    first = Owner("media", "allocate", "manual__2026-08-03T10:00:00+00:00", 2)
    calls = [
        (("2026-W32", "k", None), first),  # new, owned
        (("2026-W32", "k", None), Owner("media", "renamed", "manual__x", None)),  # the same DAG: reused, first owner
        (("2026-W32", "k", None), Owner("intruder", "allocate", "manual__x", None)),  # another DAG: refused
        (("2026-W32", "airflow:media:allocate:r", None), None),  # the CLI: no owner recorded
        (("2026-W32", "airflow:media:allocate:r", None), Owner("intruder", "t", "r", None)),  # the key's DAG: refused
        (("2026-W32", "airflow:media:allocate:r", None), Owner("media", "t", "r", None)),  # reused, still no owner
    ]
    _prepare(pg_database, Case((), ("2026-W32", "k", None), ""))
    with (
        PythonRuleStore(pg_database, namespace=PYTHON) as python,
        PostgresEpisodeStore(pg_database, namespace=SERVER) as server,
    ):
        answers = []
        for call, owner in calls:
            by_python = _outcome(python, lambda *a, o=owner: EpisodeStore.allocate(python, *a, owner=o), call)
            by_server = _outcome(server, lambda *a, o=owner: server.allocate(*a, owner=o), call)
            assert by_server == by_python, call
            answers.append(by_server)
    assert answers[0][1]["metadata"] == answers[1][1]["metadata"] == {"allocated_by": first.to_dict()}
    assert [a[0] for a in answers] == [
        "2026-W32-0",
        "reused 2026-W32-0",
        "AllocationConflict",
        "2026-W32-1",
        "AllocationConflict",
        "reused 2026-W32-1",
    ]
    assert "by DAG 'media' (recorded)" in answers[2][1] and "by DAG 'media' (named by its key)" in answers[4][1]


def test_every_sqlstate_the_function_raises_has_an_answer() -> None:
    """The function as the last migration that (re)defines it has it (0006: the effects column; 0005 added IJ010)."""
    header = "FUNCTION {schema}.allocate_episode("
    text = [m.sql for m in pg_schema.MIGRATIONS if header in m.sql][-1]
    function = text[text.index(header) :]  # the function only, not the triggers before it
    raised = set(re.findall(r"ERRCODE = '(IJ[0-9]{3})'", function))
    assert raised == pg_allocate.ANSWERS | {pg_allocate.NOT_READ_COMMITTED}
    assert len(pg_allocate.ANSWERS) == 5


def test_a_key_committed_outside_the_lock_meanwhile_is_a_conflict(pg_database: str) -> None:
    """A writer that bypasses the lock inserts the key while the call runs: the unique index refuses."""
    store = PostgresEpisodeStore(pg_database)
    store.allocate("2026-W31", "before")
    # The row is not committed yet when the call starts: the call does not see it.
    (exc,) = _allocate_while_a_bypass_commits(store, pg_database, ("2026-W30", 0, "k", None))
    assert isinstance(exc, AllocationConflict), exc
    assert str(exc) == "allocation key 'k': committed concurrently outside the lock"
    assert [e.episode_id for e in store.list()] == ["2026-W30-0", "2026-W31-0"]
    store.close()


def test_a_sequence_committed_outside_the_lock_meanwhile_is_store_corrupted_naming_it(pg_database: str) -> None:
    store = PostgresEpisodeStore(pg_database)
    store.allocate("2026-W32", "before")
    (exc,) = _allocate_while_a_bypass_commits(store, pg_database, ("2026-W32", 1, "other", None))
    assert isinstance(exc, StoreCorrupted), exc
    assert exc.where.endswith("idempotent_jobs.episodes[default/2026-W32-1]"), exc.where
    assert exc.reason.startswith("insert refused by episodes_"), exc.reason
    store.close()


def _allocate_while_a_bypass_commits(
    store: PostgresEpisodeStore, url: str, row: tuple[str, int, str, str | None]
) -> list[BaseException | str]:
    """Allocate ``k`` in 2026-W32 while a writer that bypasses the lock inserts ``row`` and commits
    it once the call waits for a lock; what the call returned or raised."""
    bypass = psycopg.connect(url)
    try:
        _seed(bypass, "default", (row,))
        outcome: list[BaseException | str] = []
        caller = threading.Thread(target=lambda: _catch(outcome, lambda: store.allocate("2026-W32", "k")))
        caller.start()
        _wait_for_a_lock_wait(url)
        bypass.commit()
        caller.join(timeout=60)
    finally:
        bypass.close()
    return outcome


def _wait_for_a_lock_wait(url: str) -> None:
    """Until the call waits on the bypassing transaction's index entry (it holds the advisory lock then)."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
    with psycopg.connect(url, autocommit=True) as admin:
        for _ in range(3000):
            waiting = admin.execute(query).fetchone()
            if waiting and waiting[0]:
                return
            threading.Event().wait(0.02)
    raise AssertionError("the call never waited for the bypassing writer")


def _catch(into: list[BaseException | str], call: Any) -> None:
    try:
        into.append(call().episode_id)
    except BaseException as exc:
        into.append(exc)


def test_the_function_refuses_to_run_outside_read_committed(pg_database: str) -> None:
    """Its reads after the lock must see commits made during the wait: a REPEATABLE READ snapshot would not."""
    store = PostgresEpisodeStore(pg_database)
    store.ensure_schema()
    sql = pg_allocate.call_sql("idempotent_jobs", store.lock_key, 1000)
    params = ("default", "2026-W32", "k", None, "x", "{}", None)  # namespace, week, key, fp, now, metadata, identity
    with psycopg.connect(pg_database) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(sql, params)
        assert caught.value.sqlstate == pg_allocate.NOT_READ_COMMITTED
    assert store.list() == []
    store.close()


@pytest.mark.parametrize("where", ["server", "engine"])
@pytest.mark.parametrize("isolation", ["repeatable read", "serializable"])
def test_a_stricter_default_isolation_still_allocates_under_read_committed(
    pg_database: str, where: str, isolation: str
) -> None:
    """The server's default, or the caller's engine's: the store then sends its own READ COMMITTED transaction."""
    dbname = pg_database.rsplit("/", 1)[1]
    url = pg_database.replace("postgresql://", "postgresql+psycopg://", 1)
    if where == "server":
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE \"{dbname}\" SET default_transaction_isolation = '{isolation}'")
        engine = sa.create_engine(url)
    else:
        option = isolation.replace(" ", r"\ ")
        engine = sa.create_engine(url, connect_args={"options": f"-c default_transaction_isolation={option}"})
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW default_transaction_isolation").scalar_one() == isolation
        stores = [PostgresEpisodeStore(engine) for _ in range(4)]
        got: list[list[str]] = [[] for _ in stores]

        def allocate_many(n: int) -> None:
            for i in range(25):
                got[n].append(stores[n].allocate("2026-W32", f"s{n}-{i}").episode_id)

        threads = [threading.Thread(target=allocate_many, args=(n,)) for n in range(len(stores))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        # Each waited for the lock and still saw every commit made meanwhile: no gap, no duplicate.
        everything = sorted(int(e.rsplit("-", 1)[1]) for ids in got for e in ids)
        assert everything == list(range(100))
        assert all(store.explicit_transaction for store in stores)
        again = stores[0].allocate("2026-W32", "s1-3")
        assert (again.reused, again.episode_id) == (True, got[1][3])
        assert check_store(stores[0]) == []
        for store in stores:
            store.close()
    finally:
        engine.dispose()
