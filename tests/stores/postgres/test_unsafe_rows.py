"""Rows the PostgreSQL store must refuse to read: JSON Python cannot hold safely, numbers out of range.

Each row is damaged with raw SQL, as another writer (or a restore) could. PostgreSQL's jsonb takes
``1e999`` (a numeric of 1 000 digits), integers of thousands of digits, and nesting thousands
deep; the driver's ``json.loads`` would hand back the first two and die with a RecursionError
on the third. Every command but ``check`` exits 5 with one line naming the row; ``check`` exits
1 with a line naming it, and still reads the healthy rows.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import StoreCorrupted, open_store, safe_json
from airflow_idempotent_jobs.store_check import check_store
from tests.clirun import run_cli, run_main

pytestmark = pytest.mark.postgres

LIMIT = safe_json.MAX_DEPTH  # with the object around it: one level past the limit
DEEP = 10_000  # about what PostgreSQL's own parser takes with its default 2 MB stack

#: (name, column, SQL expression for the damaged value)
DAMAGE = {
    "nested-10000-deep": (
        "submission",
        f"submission || jsonb_build_object('result', (repeat('[', {DEEP}) || repeat(']', {DEEP}))::jsonb)",
    ),
    "nested-one-past-the-limit": (
        "metadata",
        f"jsonb_build_object('note', (repeat('[', {LIMIT}) || repeat(']', {LIMIT}))::jsonb)",
    ),
    "1e999-as-attempts": ("submission", "jsonb_set(submission, '{attempts}', '1e999'::jsonb)"),
    "1e999-as-cost": ("submission", "jsonb_set(submission, '{cost}', '1e999'::jsonb)"),
    "5000-digit-integer": ("metadata", "jsonb_build_object('count', ('9' || repeat('0', 4999))::jsonb)"),
}


def _damage(url: str, episode_id: str, column: str, expression: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        done = conn.execute(
            f"UPDATE idempotent_jobs.episodes SET {column} = {expression} WHERE episode_id = %s", (episode_id,)
        ).rowcount
    assert done == 1


def _populated(url: str) -> None:
    with open_store(url) as store:
        store.allocate("2026-W32", "bad-one")
        store.allocate("2026-W32", "good-one")


def _assert_store_error_naming(done: Any, row: str) -> None:
    assert (done.code, done.stdout) == (5, ""), (done.code, done.stdout, done.stderr)
    line = done.error_line()
    assert row in line and "store corrupted" in line, line


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_row_python_must_not_parse_is_store_corrupted_naming_it(pg_database: str, case: str) -> None:
    _populated(pg_database)
    column, expression = DAMAGE[case]
    _damage(pg_database, "2026-W32-0", column, expression)
    row = "episodes[default/2026-W32-0]"
    with open_store(pg_database) as store:
        for call in (lambda: store.get("2026-W32-0"), store.list, lambda: store.find("bad-one")):
            with pytest.raises(StoreCorrupted) as caught:
                call()
            assert row in str(caught.value) and column in str(caught.value)
        with pytest.raises(StoreCorrupted, match=r"2026-W32-0"):
            store.allocate("2026-W32", "bad-one")  # the key's holder is read under the lock
        assert store.get("2026-W32-1").allocation_key == "good-one"
        problems = check_store(store)
        assert [(p.where.endswith(row[:-1] + "]"), column in p.message) for p in problems] == [(True, True)]
    _assert_store_error_naming(run_cli("--store", pg_database, "show", "2026-W32-0"), row)
    _assert_store_error_naming(run_cli("--store", pg_database, "list"), row)
    _assert_store_error_naming(
        run_main("--store", pg_database, "allocate", "--week", "2026-W32", "--key", "bad-one"), row
    )
    _assert_store_error_naming(run_main("--store", pg_database, "reconcile", "2026-W32-0", "--not-submitted"), row)
    check = run_cli("--store", pg_database, "check")
    assert check.code == 1, (check.stdout, check.stderr)
    assert "Traceback" not in check.stderr
    assert [line for line in check.stdout.splitlines() if "2026-W32-0" in line], check.stdout


def test_postgresql_itself_refuses_200000_levels(pg_database: str) -> None:
    """The deepest case of the issue cannot be stored: jsonb's own parser stops at its stack limit."""
    _populated(pg_database)
    with pytest.raises(psycopg.errors.StatementTooComplex):
        _damage(pg_database, "2026-W32-0", "metadata", "(repeat('[', 200000) || repeat(']', 200000))::jsonb")


def test_the_store_engine_parses_jsonb_strictly(pg_database: str) -> None:
    """Any jsonb read through the store's own engine goes through safe_json, not the driver's json.loads."""
    import sqlalchemy as sa

    with open_store(pg_database) as store, store.engine.connect() as conn:  # type: ignore[attr-defined]
        assert conn.execute(sa.text("SELECT '{\"a\": 1.5}'::jsonb")).scalar_one() == {"a": 1.5}
        with pytest.raises(safe_json.UnsafeJson):
            conn.execute(sa.text("SELECT '1e999'::jsonb")).scalar_one()


def test_a_high_water_mark_no_episode_can_follow_is_store_corrupted(pg_database: str) -> None:
    _populated(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("UPDATE idempotent_jobs.weeks SET highest_sequence = 2147483647")
    row = "weeks[default/2026-W32]"
    with open_store(pg_database) as store:
        with pytest.raises(StoreCorrupted, match=r"weeks\[default/2026-W32\].*out of range"):
            store.allocate("2026-W32", "next")
        assert store.allocate("2026-W33", "elsewhere").episode_id == "2026-W33-0"
    _assert_store_error_naming(run_cli("--store", pg_database, "allocate", "--week", "2026-W32", "--key", "k"), row)
    check = run_cli("--store", pg_database, "check")
    assert check.code == 1
    assert [line for line in check.stdout.splitlines() if row in line and "out of range" in line], check.stdout


def test_a_sequence_column_out_of_the_id_range_is_store_corrupted(pg_database: str) -> None:
    _populated(pg_database)
    big = 1_000_000_000  # fits the integer column, not an episode id
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO idempotent_jobs.episodes SELECT namespace, week_id || '-' || %(s)s, week_id, %(s)s, "
            "'too-far', fingerprint, status, created_at, updated_at, submission_state, submission, metadata, "
            "schema_version FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'",
            {"s": big},
        )
    row = f"episodes[default/2026-W32-{big}]"
    _assert_store_error_naming(run_cli("--store", pg_database, "list"), row)
    _assert_store_error_naming(
        run_main("--store", pg_database, "allocate", "--week", "2026-W32", "--key", "too-far"), row
    )
    check = run_main("--store", pg_database, "check")
    assert check.code == 1
    assert row in check.stdout, check.stdout
